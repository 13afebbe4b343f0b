"""What a shard's config is checked beside: the models and pipelines of the environment's other
stacks, as its platform stack last saw them (its exported directory).

A shard holds some of an environment's models. Its own config is validated as a stack's is, and a
check that spans models (names claimed once, calls that resolve and never go round in a circle,
pipeline steps, GPUs against the cluster's) also counts the neighbours. They are handed to the
validators of StackConfig for the length of one validation (`beside`), not stored in the config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Usage:
    """Accelerators at minimum replicas, awake and at peak."""

    min: int
    awake: int
    peak: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.min + other.min, self.awake + other.awake, self.peak + other.peak)


@dataclass(frozen=True)
class Neighbour:
    """A model or pipeline of another stack of the environment."""

    shard: str
    kind: Literal["model", "pipeline"]
    object_names: tuple[str, ...]
    """The names its Kubernetes objects take (a model's, its versions', its in-mesh route's)."""
    calls: tuple[str, ...] = ()
    """The models it calls (a model's `calls`, a pipeline's steps)."""
    sleeps: bool = False
    """A model that sleeps at zero replicas."""


@dataclass(frozen=True)
class Elsewhere:
    """The environment's other stacks: their models and pipelines by name, and what their models hold."""

    neighbours: Mapping[str, Neighbour] = field(default_factory=dict)
    gpus: Usage = Usage(0, 0, 0)
    npus: Mapping[str, Usage] = field(default_factory=dict)
    """By Ascend device type."""

    @property
    def models(self) -> dict[str, Neighbour]:
        return {name: n for name, n in self.neighbours.items() if n.kind == "model"}


_ELSEWHERE: ContextVar[Elsewhere | None] = ContextVar("elsewhere", default=None)
NOWHERE = Elsewhere()


def elsewhere() -> Elsewhere:
    """The neighbours the config being validated is checked beside (none for a whole environment)."""
    return _ELSEWHERE.get() or NOWHERE


@contextmanager
def beside(neighbours: Elsewhere) -> Iterator[None]:
    """Validate a shard's config beside its neighbours for the length of the block."""
    token = _ELSEWHERE.set(neighbours)
    try:
        yield
    finally:
        _ELSEWHERE.reset(token)
