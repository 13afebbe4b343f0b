"""Small pieces of PromQL shared by the comparison's and the payload comparator's queries."""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

# RE2's metacharacters; Prometheus anchors a label regex at both ends, so an alternation of
# escaped values matches exactly those values.
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def one_of(values: Iterable[str]) -> str:
    """A label regex (for `=~"..."`) that matches exactly these values, sorted so the query is
    the same whatever their order."""
    return "|".join(_regex_literal(value) for value in sorted(set(values)))


def _regex_literal(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in _RE2_SPECIAL else c for c in value)
    # ... and written inside a PromQL double-quoted string, where a backslash is itself escaped.
    return escaped.replace("\\", "\\\\").replace('"', '\\"')


def duration(nanoseconds: Fraction) -> str:
    """A duration as Prometheus writes one (`1h30m`, `45m`, `1m30s500ms`), rounded up to a millisecond,
    its smallest unit."""
    left = math.ceil(nanoseconds / 10**6)
    parts = []
    for unit, milliseconds in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, left = divmod(left, milliseconds)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
