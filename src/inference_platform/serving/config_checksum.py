"""The pod annotation that rolls a workload when the config it reads at start changes: a digest of
that config on the pod template, so a new config is a new template. Every workload with a
generated config writes it (model versions and their LeaderWorkerSet groups, the payload
comparator), and nothing else spells its name."""

from __future__ import annotations

import hashlib
from typing import Final

CONFIG_CHECKSUM: Final = "inference-platform/config-sha256"


def config_checksum(config: str) -> dict[str, str]:
    """The annotation for a pod whose config is `config` (its text, as the pod reads it)."""
    return {CONFIG_CHECKSUM: hashlib.sha256(config.encode()).hexdigest()}
