"""The joiner: pairs each shadow's exchange with its primary's by request id and compares them.

Pure logic: no gRPC, no clock of its own (one is injected), counts through a MetricsSink.

Join key: (namespace, model, request id with its trace nibble normalised). A primary exchange is
compared with every shadow exchange already waiting for its key, then kept (for the shadows still
missing) until its model's window ends; a shadow exchange is compared with its primary's if that
is held, else kept until the window ends waiting for it. Each (primary, shadow version) pair is
compared at most once. Every exchange handed in ends as part of a compared pair, as unpaired at
the end of the window, or as dropped with a reason.

Memory is bounded by bytes: what is held (response bodies plus a fixed overhead per held exchange;
request bodies are not held, only their SHA-256, checked to be the same request on both sides),
together with the bodies of the exchanges still arriving (the server reserves them chunk by
chunk), never exceeds maxBufferedBytes. Held bodies are never logged or written anywhere.
"""

from __future__ import annotations

import hashlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, get_args

from inference_comparator.config import Config, ModelConfig
from inference_comparator.protocols import PrimaryUnreadableError, Verdict, check_primary, compare

Side = Literal["primary", "shadow"]
DropReason = Literal[
    "memory",  # holding it would pass maxBufferedBytes
    "overload",  # it came while the most streams the server reads at once were open
    "body_too_large",  # a request or response body past maxBodyBytes
    "unknown_version",  # a (namespace, model, version) the config does not name
    "no_request_id",  # no x-request-id header
    "primary_error",  # the primary answered non-2xx: it and its shadows' exchanges
    "primary_unreadable",  # the primary's body is not the protocol's: it and its shadows' exchanges
    "duplicate",  # a second exchange of one version for one request id
    "request_mismatch",  # a shadow whose request body differs from its primary's: not the same request
    "incomplete",  # a stream that ended (or broke) before the response's end
    "internal_error",  # the comparator failed on it (logged, without payloads)
]
DROP_REASONS: Final[tuple[DropReason, ...]] = get_args(DropReason)

# What holding one exchange costs beyond its response body: the request's digest, its ids, the bookkeeping.
HELD_OVERHEAD_BYTES: Final = 256

_UUID_DASHES: Final = (8, 13, 18, 23)
_HEX: Final = frozenset("0123456789abcdefABCDEF")
TRACE_NIBBLE_INDEX: Final = 14
_NORMALISED_NIBBLE: Final = "x"


class MetricsSink(Protocol):
    """Where the joiner counts what happened (metrics.PrometheusSink; a recorder in tests)."""

    def paired(self, namespace: str, model: str, version: str, agree: bool, max_abs_difference: float | None) -> None:
        """One shadow exchange (of `version`) compared with its primary's."""

    def unpaired(self, namespace: str, model: str, version: str, side: Side) -> None:
        """The window ended without a twin: `side` arrived, shadow `version`'s half of the pair never did."""

    def dropped(self, reason: DropReason) -> None:
        """One exchange not compared, for `reason`."""


@dataclass(frozen=True)
class Exchange:
    """One HTTP exchange seen by one version's sidecar."""

    namespace: str
    model: str
    version: str
    request_id: str | None
    status: int
    request_body: bytes
    response_body: bytes


def normalise_request_id(request_id: str) -> str:
    """The request id with Envoy's trace nibble (a UUID's 15th character, which Envoy may rewrite
    on one side of a mirror) replaced by a fixed character; anything not a UUID is unchanged."""
    if (
        len(request_id) == 36
        and all(request_id[i] == "-" for i in _UUID_DASHES)
        and all(c in _HEX for i, c in enumerate(request_id) if i not in _UUID_DASHES)
    ):
        return request_id[:TRACE_NIBBLE_INDEX] + _NORMALISED_NIBBLE + request_id[TRACE_NIBBLE_INDEX + 1 :]
    return request_id


def sampled(normalised_id: str, sample: float) -> bool:
    """Whether a request is kept at this sampling rate: a stable hash of its normalised id, so
    that the primary's and every shadow's sidecar make the same choice."""
    if sample >= 1:
        return True
    digest = hashlib.sha256(normalised_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < sample


def is_success(status: int) -> bool:
    return 200 <= status < 300


@dataclass(eq=False)
class _Held:
    """An exchange held for its twin (its request body reduced to a digest)."""

    version: str
    status: int
    response_body: bytes
    request_digest: bytes
    cost: int


@dataclass(eq=False)
class _Refusal:
    """A primary exchange that was dropped: its shadows' exchanges are dropped for the same reason."""

    reason: DropReason
    pending: set[str]  # shadow versions not yet seen
    cost: int


@dataclass(eq=False)
class _Entry:
    model: ModelConfig
    primary: _Held | None = None
    compared: set[str] = field(default_factory=set)  # shadow versions compared with the held primary
    shadows: dict[str, _Held] = field(default_factory=dict)  # shadow exchanges waiting for the primary
    refusal: _Refusal | None = None

    def empty(self) -> bool:
        return self.primary is None and not self.shadows and self.refusal is None


_Key = tuple[str, str, str]  # namespace, model, normalised request id


class Joiner:
    def __init__(self, config: Config, sink: MetricsSink, clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._sink = sink
        self._clock = clock
        self._entries: dict[_Key, _Entry] = {}
        # Per model, what is held in the order it arrived, with when it must go: each model has one
        # window, so every queue is in deadline order.
        self._queues: dict[tuple[str, str], deque[tuple[float, _Key, _Held | _Refusal]]] = {
            (m.namespace, m.model): deque() for m in config.models
        }
        self._buffered_bytes = 0

    @property
    def buffered_bytes(self) -> int:
        """What is held now, by this joiner's accounting (never more than maxBufferedBytes)."""
        return self._buffered_bytes

    @property
    def held(self) -> int:
        """How many exchanges (and refusals of primaries) are held now."""
        return sum(
            (entry.primary is not None) + len(entry.shadows) + (entry.refusal is not None)
            for entry in self._entries.values()
        )

    @property
    def max_body_bytes(self) -> int:
        return self._config.max_body_bytes

    def dropped(self, reason: DropReason) -> None:
        """Count an exchange the caller (the server) dropped before it was complete."""
        self._sink.dropped(reason)

    def admit(self, namespace: str | None, model: str | None, version: str | None, request_id: str | None) -> bool:
        """Whether an exchange with these names is worth accumulating (the server asks after its
        request headers). Counts unknown_version and no_request_id; a request not sampled is
        refused without being counted."""
        return self._admit(namespace, model, version, request_id) is not None

    def _admit(
        self, namespace: str | None, model: str | None, version: str | None, request_id: str | None
    ) -> ModelConfig | None:
        config = self._config.model(namespace, model) if namespace is not None and model is not None else None
        if config is None or (version != config.primary and version not in config.shadows):
            self._sink.dropped("unknown_version")
            return None
        if not request_id:
            self._sink.dropped("no_request_id")
            return None
        if not sampled(normalise_request_id(request_id), config.sample):
            return None
        return config

    def add(self, exchange: Exchange) -> None:
        """Take one complete exchange: compare it with its twins held, or hold it for them."""
        now = self._clock()
        self.expire(now)
        model = self._admit(exchange.namespace, exchange.model, exchange.version, exchange.request_id)
        if model is None:
            return
        assert exchange.request_id is not None  # admitted
        limit = self._config.max_body_bytes
        if len(exchange.request_body) > limit or len(exchange.response_body) > limit:
            self._sink.dropped("body_too_large")
            return
        key = (model.namespace, model.model, normalise_request_id(exchange.request_id))
        digest = hashlib.sha256(exchange.request_body).digest()
        if exchange.version == model.primary:
            self._add_primary(key, model, exchange, digest, now)
        else:
            self._add_shadow(key, model, exchange, digest, now)

    def expire(self, now: float | None = None) -> None:
        """Let go of what has been held longer than its model's window, counting it unpaired."""
        if now is None:
            now = self._clock()
        for queue in self._queues.values():
            while queue and queue[0][0] < now:
                _, key, item = queue.popleft()
                entry = self._entries.get(key)
                if entry is None:
                    continue
                if isinstance(item, _Refusal):
                    if entry.refusal is item:
                        self._release(item.cost)
                        entry.refusal = None
                elif entry.primary is item:
                    for version in entry.model.shadows:
                        if version not in entry.compared:
                            self._sink.unpaired(key[0], key[1], version, "primary")
                    self._release(item.cost)
                    entry.primary = None
                    entry.compared.clear()
                elif entry.shadows.get(item.version) is item:
                    self._sink.unpaired(key[0], key[1], item.version, "shadow")
                    self._release(item.cost)
                    del entry.shadows[item.version]
                if entry.empty():
                    del self._entries[key]

    def _add_primary(self, key: _Key, model: ModelConfig, exchange: Exchange, digest: bytes, now: float) -> None:
        entry = self._entries.get(key)
        if entry is not None and (entry.primary is not None or entry.refusal is not None):
            self._sink.dropped("duplicate")
            return
        if entry is None:
            entry = _Entry(model=model)
        refusal: DropReason | None = None
        if not is_success(exchange.status):
            refusal = "primary_error"
        else:
            try:
                check_primary(model.protocol, exchange.response_body)
            except PrimaryUnreadableError:
                refusal = "primary_unreadable"
        if refusal is not None:
            self._refuse(key, entry, refusal, now)
            return
        primary = _Held(
            version=exchange.version,
            status=exchange.status,
            response_body=exchange.response_body,
            request_digest=digest,
            cost=len(exchange.response_body) + HELD_OVERHEAD_BYTES,
        )
        for version, shadow in list(entry.shadows.items()):
            del entry.shadows[version]
            self._release(shadow.cost)
            if self._pair(key, model, primary, shadow):
                entry.compared.add(version)
        if entry.compared.issuperset(model.shadows):
            self._settle(key, entry)
            return
        if self._reserve(primary.cost):
            entry.primary = primary
            self._entries[key] = entry
            self._queues[key[:2]].append((now + model.window_seconds, key, primary))
            return
        self._sink.dropped("memory")
        missing = set(model.shadows) - entry.compared
        entry.compared.clear()
        self._hold_refusal(key, entry, _Refusal("memory", missing, HELD_OVERHEAD_BYTES), now)

    def _add_shadow(self, key: _Key, model: ModelConfig, exchange: Exchange, digest: bytes, now: float) -> None:
        entry = self._entries.get(key)
        version = exchange.version
        if entry is not None and entry.refusal is not None:
            refusal = entry.refusal
            if version in refusal.pending:
                refusal.pending.discard(version)
                self._sink.dropped(refusal.reason)
                if not refusal.pending:
                    self._release(refusal.cost)
                    entry.refusal = None
                    self._settle(key, entry)
            else:
                self._sink.dropped("duplicate")
            return
        if entry is not None and entry.primary is not None:
            if version in entry.compared:
                self._sink.dropped("duplicate")
                return
            shadow = _Held(version, exchange.status, exchange.response_body, digest, 0)
            if self._pair(key, model, entry.primary, shadow):
                entry.compared.add(version)
                if entry.compared.issuperset(model.shadows):
                    self._release(entry.primary.cost)
                    entry.primary = None
                    entry.compared.clear()
                    self._settle(key, entry)
            return
        if entry is not None and version in entry.shadows:
            self._sink.dropped("duplicate")
            return
        shadow = _Held(version, exchange.status, exchange.response_body, digest, 0)
        shadow.cost = len(exchange.response_body) + HELD_OVERHEAD_BYTES
        if not self._reserve(shadow.cost):
            self._sink.dropped("memory")
            return
        if entry is None:
            entry = self._entries[key] = _Entry(model=model)
        entry.shadows[version] = shadow
        self._queues[key[:2]].append((now + model.window_seconds, key, shadow))

    def _pair(self, key: _Key, model: ModelConfig, primary: _Held, shadow: _Held) -> bool:
        """Compare one shadow with its primary and count the verdict; False when they were not
        the same request (counted as dropped instead)."""
        if shadow.request_digest != primary.request_digest:
            self._sink.dropped("request_mismatch")
            return False
        if is_success(shadow.status):
            try:
                verdict = compare(model.protocol, primary.response_body, shadow.response_body, model.tolerances)
            except PrimaryUnreadableError:  # checked on arrival, so only a document too deep to walk
                self._sink.dropped("primary_unreadable")
                return False
        else:
            verdict = Verdict(agree=False, max_abs_difference=None, reason="shadow answered non-2xx")
        self._sink.paired(key[0], key[1], shadow.version, verdict.agree, verdict.max_abs_difference)
        return True

    def _refuse(self, key: _Key, entry: _Entry, reason: DropReason, now: float) -> None:
        """Drop a primary exchange, the shadow exchanges waiting for it and, until the window
        ends, those still to come."""
        self._sink.dropped(reason)
        waiting = set(entry.shadows)
        for shadow in entry.shadows.values():
            self._release(shadow.cost)
            self._sink.dropped(reason)
        entry.shadows.clear()
        pending = set(entry.model.shadows) - waiting
        self._hold_refusal(key, entry, _Refusal(reason, pending, HELD_OVERHEAD_BYTES), now)

    def _hold_refusal(self, key: _Key, entry: _Entry, refusal: _Refusal, now: float) -> None:
        if refusal.pending and self._reserve(refusal.cost):
            entry.refusal = refusal
            self._entries[key] = entry
            self._queues[key[:2]].append((now + entry.model.window_seconds, key, refusal))
        else:
            self._settle(key, entry)

    def _settle(self, key: _Key, entry: _Entry) -> None:
        """Forget the entry when nothing of it is held any more."""
        if entry.empty() and self._entries.get(key) is entry:
            del self._entries[key]

    def reserve_in_flight(self, size: int) -> bool:
        """Count `size` bytes of a stream still arriving against maxBufferedBytes (what arrives is
        held too, until its exchange is complete); False, reserving nothing, when it would pass it.
        The caller releases all it reserved (release_in_flight) before it adds the exchange."""
        return self._reserve(size)

    def release_in_flight(self, size: int) -> None:
        self._release(size)

    def _reserve(self, cost: int) -> bool:
        if self._buffered_bytes + cost > self._config.max_buffered_bytes:
            return False
        self._buffered_bytes += cost
        return True

    def _release(self, cost: int) -> None:
        self._buffered_bytes -= cost
