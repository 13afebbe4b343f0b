"""Pod Security Admission labels (https://kubernetes.io/docs/concepts/security/pod-security-admission/)
for every Namespace the program creates: the level the API server enforces on the namespace's pods,
and the level it warns about (to whoever applies a workload) and records in its audit log, each
pinned to one version of the standards (pins.POD_SECURITY_VERSION).

The levels per namespace are decided where each namespace is made (platform/helm.py's callers,
serving/model_namespace.py); this module only spells them as labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from inference_platform import pins

Level = Literal["privileged", "baseline", "restricted"]
LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")


@dataclass(frozen=True)
class PodSecurity:
    """What a namespace enforces, and what it reports (audit and warn) when a pod falls short of a
    stricter level than the one enforced: both levels at one version of the standards."""

    enforce: Level
    report: Level | None = None
    """audit and warn; the enforced level when None."""

    def labels(self) -> dict[str, str]:
        levels = {"enforce": self.enforce, "audit": self.report or self.enforce, "warn": self.report or self.enforce}
        labels: dict[str, str] = {}
        for mode in MODES:
            labels[f"{LABEL_PREFIX}{mode}"] = levels[mode]
            labels[f"{LABEL_PREFIX}{mode}-version"] = pins.POD_SECURITY_VERSION
        return labels


# Platform namespaces whose pods need no host access.
BASELINE = PodSecurity("baseline")
# Device plugins and exporters: host paths, the host's PID namespace, privileged containers; the model
# cache's agent (serving/cache_agent.py): the cache path by hostPath.
PRIVILEGED = PodSecurity("privileged")
