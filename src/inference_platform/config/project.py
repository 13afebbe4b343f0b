"""The Pulumi project this program is: the namespace of its stack files' config keys."""

from __future__ import annotations

PROJECT = "inference-platform"
