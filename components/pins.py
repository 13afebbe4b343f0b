"""Every container image and Helm chart the platform deploys, pinned in this one place.

Bump a version here and nowhere else; tests refuse `latest` and unpinned references.
"""

from __future__ import annotations

MLSERVER_IMAGE = "docker.io/seldonio/mlserver:1.7.1"
