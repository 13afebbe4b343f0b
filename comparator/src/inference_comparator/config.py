"""The comparator's config file: JSON the platform writes into a ConfigMap (`--config PATH`).

    {"maxBufferedBytes": 67108864, "maxBodyBytes": 1048576,
     "models": [{"namespace": "service", "model": "iris", "protocol": "open-inference-v2",
                 "primary": "v1", "shadows": ["v3"], "windowSeconds": 70,
                 "absoluteTolerance": 1e-6, "relativeTolerance": 1e-4, "minTextSimilarity": 0.9, "sample": 1.0}]}

Every key is required and no other is allowed: the platform writes them all, and a typo must not
pass for a default. A mistake is refused with a ConfigError whose message starts with the key's
path (`models[0].sample: ...`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from inference_comparator.protocols import ALIASES, PROTOCOLS, Protocol, Tolerances

_TOP_KEYS: Final = ("maxBufferedBytes", "maxBodyBytes", "models")
_MODEL_KEYS: Final = (
    "namespace",
    "model",
    "protocol",
    "primary",
    "shadows",
    "windowSeconds",
    "absoluteTolerance",
    "relativeTolerance",
    "minTextSimilarity",
    "sample",
)
# Kubernetes names and the platform's version names: letters, digits, '-', '_' and '.', alphanumeric at both ends.
_NAME: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?")


class ConfigError(ValueError):
    """A config file the comparator cannot run with; the message names the key path at fault."""


@dataclass(frozen=True)
class ModelConfig:
    """One model: its primary version, the shadows compared with it, and how closely they must agree."""

    namespace: str
    model: str
    protocol: Protocol
    primary: str
    shadows: tuple[str, ...]
    window_seconds: float
    tolerances: Tolerances
    sample: float


@dataclass(frozen=True)
class Config:
    max_buffered_bytes: int
    max_body_bytes: int
    models: tuple[ModelConfig, ...]
    _by_name: dict[tuple[str, str], ModelConfig] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {(m.namespace, m.model): m for m in self.models})

    def model(self, namespace: str, model: str) -> ModelConfig | None:
        return self._by_name.get((namespace, model))


def load_config(path: str | Path) -> Config:
    """Read and check the config file at `path`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8"
        raise ConfigError(f"{path}: cannot read: {reason}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    return parse_config(doc)


def parse_config(doc: Any) -> Config:
    """Check a parsed config document and build the Config."""
    _keys(doc, "", _TOP_KEYS)
    max_buffered = _positive_int(doc["maxBufferedBytes"], "maxBufferedBytes")
    max_body = _positive_int(doc["maxBodyBytes"], "maxBodyBytes")
    if max_body > max_buffered:
        raise ConfigError(f"maxBodyBytes: {max_body} is more than maxBufferedBytes ({max_buffered})")
    models_doc = doc["models"]
    if not isinstance(models_doc, list):
        raise ConfigError("models: must be a list")
    models: list[ModelConfig] = []
    seen: dict[tuple[str, str], int] = {}
    for i, model_doc in enumerate(models_doc):
        model = _model(model_doc, f"models[{i}]")
        name = (model.namespace, model.model)
        if name in seen:
            raise ConfigError(
                f"models[{i}]: repeats models[{seen[name]}] (namespace {model.namespace!r}, model {model.model!r})"
            )
        seen[name] = i
        models.append(model)
    return Config(max_buffered_bytes=max_buffered, max_body_bytes=max_body, models=tuple(models))


def _model(doc: Any, path: str) -> ModelConfig:
    _keys(doc, path, _MODEL_KEYS)
    protocol = _protocol(doc["protocol"], f"{path}.protocol")
    primary = _name(doc["primary"], f"{path}.primary")
    shadows_doc = doc["shadows"]
    if not isinstance(shadows_doc, list) or not shadows_doc:
        raise ConfigError(f"{path}.shadows: must be a non-empty list of version names")
    shadows: list[str] = []
    for j, shadow_doc in enumerate(shadows_doc):
        shadow = _name(shadow_doc, f"{path}.shadows[{j}]")
        if shadow == primary:
            raise ConfigError(f"{path}.shadows[{j}]: {shadow!r} is the primary version")
        if shadow in shadows:
            raise ConfigError(f"{path}.shadows[{j}]: {shadow!r} is listed twice")
        shadows.append(shadow)
    window = _number(doc["windowSeconds"], f"{path}.windowSeconds")
    if window <= 0:
        raise ConfigError(f"{path}.windowSeconds: must be more than 0, not {window}")
    absolute = _number(doc["absoluteTolerance"], f"{path}.absoluteTolerance")
    relative = _number(doc["relativeTolerance"], f"{path}.relativeTolerance")
    similarity = _number(doc["minTextSimilarity"], f"{path}.minTextSimilarity")
    sample = _number(doc["sample"], f"{path}.sample")
    for key, value in (("absoluteTolerance", absolute), ("relativeTolerance", relative)):
        if value < 0:
            raise ConfigError(f"{path}.{key}: must be 0 or more, not {value}")
    if not 0 <= similarity <= 1:
        raise ConfigError(f"{path}.minTextSimilarity: must be between 0 and 1, not {similarity}")
    if not 0 < sample <= 1:
        raise ConfigError(f"{path}.sample: must be more than 0 and at most 1, not {sample}")
    return ModelConfig(
        namespace=_name(doc["namespace"], f"{path}.namespace"),
        model=_name(doc["model"], f"{path}.model"),
        protocol=protocol,
        primary=primary,
        shadows=tuple(shadows),
        window_seconds=window,
        tolerances=Tolerances(absolute=absolute, relative=relative, min_text_similarity=similarity),
        sample=sample,
    )


def _protocol(doc: Any, path: str) -> Protocol:
    """A protocol by its name, or by a former name (an alias) as the protocol it names now."""
    for protocol in PROTOCOLS:
        if doc == protocol:
            return protocol
    if isinstance(doc, str) and doc in ALIASES:
        return ALIASES[doc]
    former = ", ".join(f"{alias}, {current}'s former name" for alias, current in ALIASES.items())
    raise ConfigError(f"{path}: must be one of {', '.join(PROTOCOLS)} (or {former}), not {doc!r}")


def _keys(doc: Any, path: str, allowed: tuple[str, ...]) -> None:
    prefix = f"{path}." if path else ""
    if not isinstance(doc, dict):
        raise ConfigError(f"{path or '(top level)'}: must be an object")
    for key in doc:
        if key not in allowed:
            raise ConfigError(f"{prefix}{key}: unknown key (allowed: {', '.join(allowed)})")
    for key in allowed:
        if key not in doc:
            raise ConfigError(f"{prefix}{key}: missing")


def _positive_int(value: Any, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{path}: must be a whole number of bytes more than 0, not {value!r}")
    return value


def _number(value: Any, path: str) -> float:
    try:
        number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ConfigError(f"{path}: must be a finite number, not {value!r}")
    return number


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ConfigError(f"{path}: must be a name (letters, digits, '-', '_', '.'), not {value!r}")
    return value
