"""The joiner: pairing by request id, the window, errors, the memory bound and sampling."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from inference_comparator.config import Config, parse_config
from inference_comparator.join import (
    HELD_OVERHEAD_BYTES,
    DropReason,
    Exchange,
    Joiner,
    Side,
    normalise_request_id,
    sampled,
)

NS, MODEL = "service", "iris"
REQUEST = b'{"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}'


def answer(*scores: float) -> bytes:
    data = list(scores) or [0.9, 0.1]
    return json.dumps(
        {"model_name": MODEL, "outputs": [{"name": "p", "shape": [1, len(data)], "datatype": "FP32", "data": data}]}
    ).encode()


AGREEING = answer(0.9, 0.1)
DISAGREEING = answer(0.1, 0.9)


def config(
    shadows: tuple[str, ...] = ("v2",),
    window: float = 70,
    sample: float = 1.0,
    max_buffered: int = 64 * 1024 * 1024,
    max_body: int = 1024 * 1024,
) -> Config:
    return parse_config(
        {
            "maxBufferedBytes": max_buffered,
            "maxBodyBytes": max_body,
            "models": [
                {
                    "namespace": NS,
                    "model": MODEL,
                    "protocol": "open-inference-v2",
                    "primary": "v1",
                    "shadows": list(shadows),
                    "windowSeconds": window,
                    "absoluteTolerance": 1e-6,
                    "relativeTolerance": 1e-4,
                    "minTextSimilarity": 0.9,
                    "sample": sample,
                }
            ],
        }
    )


@dataclass
class Recorder:
    """A MetricsSink that remembers every event."""

    pairs: list[tuple[str, str, str, bool, float | None]] = field(default_factory=list)
    unpaired_events: list[tuple[str, str, str, Side]] = field(default_factory=list)
    drops: Counter[DropReason] = field(default_factory=Counter)

    def paired(self, namespace: str, model: str, version: str, agree: bool, max_abs_difference: float | None) -> None:
        self.pairs.append((namespace, model, version, agree, max_abs_difference))

    def unpaired(self, namespace: str, model: str, version: str, side: Side) -> None:
        self.unpaired_events.append((namespace, model, version, side))

    def dropped(self, reason: DropReason) -> None:
        self.drops[reason] += 1

    def pairs_by_version(self) -> Counter[str]:
        return Counter(version for _, _, version, _, _ in self.pairs)


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Setup:
    joiner: Joiner
    sink: Recorder
    clock: Clock


def setup(**kwargs: Any) -> Setup:
    sink, clock = Recorder(), Clock()
    return Setup(Joiner(config(**kwargs), sink, clock), sink, clock)


RID = "0f8fad5b-d9cb-469f-a165-70867728950e"


def exchange(
    version: str,
    *,
    request_id: str | None = RID,
    response: bytes = AGREEING,
    status: int = 200,
    request: bytes = REQUEST,
    namespace: str = NS,
    model: str = MODEL,
) -> Exchange:
    return Exchange(namespace, model, version, request_id, status, request, response)


def test_primary_first_then_shadow() -> None:
    s = setup()
    s.joiner.add(exchange("v1"))
    assert s.sink.pairs == []
    assert s.joiner.held == 1
    assert s.joiner.buffered_bytes == len(AGREEING) + HELD_OVERHEAD_BYTES
    s.clock.now = 1
    s.joiner.add(exchange("v2"))
    assert s.sink.pairs == [(NS, MODEL, "v2", True, 0.0)]
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)
    s.joiner.expire(1000)
    assert s.sink.unpaired_events == []
    assert not s.sink.drops


def test_shadow_first_then_primary() -> None:
    s = setup()
    s.joiner.add(exchange("v2", response=DISAGREEING))
    assert s.sink.pairs == []
    assert s.joiner.held == 1
    s.joiner.add(exchange("v1"))
    [(namespace, model, version, agree, difference)] = s.sink.pairs
    assert (namespace, model, version, agree) == (NS, MODEL, "v2", False)
    assert difference == pytest.approx(0.8)
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)
    s.joiner.expire(1000)
    assert s.sink.unpaired_events == []


@pytest.mark.parametrize(
    "order",
    [("v1", "v2", "v3"), ("v2", "v1", "v3"), ("v2", "v3", "v1"), ("v3", "v1", "v2")],
)
def test_two_shadows_each_compared_once(order: tuple[str, str, str]) -> None:
    s = setup(shadows=("v2", "v3"))
    for version in order:
        s.joiner.add(exchange(version))
    assert s.sink.pairs_by_version() == Counter({"v2": 1, "v3": 1})
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)
    s.joiner.expire(1000)
    assert s.sink.unpaired_events == []
    assert not s.sink.drops


def test_a_second_exchange_of_one_version_is_a_duplicate() -> None:
    s = setup(shadows=("v2", "v3"))
    s.joiner.add(exchange("v1"))
    s.joiner.add(exchange("v2"))
    s.joiner.add(exchange("v2"))  # compared already
    s.joiner.add(exchange("v1"))  # held already
    assert s.sink.drops == Counter({"duplicate": 2})
    s.joiner.add(exchange("v3"))
    assert s.sink.pairs_by_version() == Counter({"v2": 1, "v3": 1})
    waiting = setup()
    waiting.joiner.add(exchange("v2"))
    waiting.joiner.add(exchange("v2"))  # one waiting already
    assert waiting.sink.drops == Counter({"duplicate": 1})
    assert waiting.joiner.held == 1


def test_normalise_request_id() -> None:
    assert normalise_request_id(RID) == "0f8fad5b-d9cb-x69f-a165-70867728950e"
    for nibble in "49ab":
        assert normalise_request_id(RID[:14] + nibble + RID[15:]) == normalise_request_id(RID)
    assert normalise_request_id(RID) != normalise_request_id(RID[:15] + "0" + RID[16:])  # only the 15th
    for other in ("req-1", "", RID.replace("-", "_"), RID[:35] + "g", RID + "0"):
        assert normalise_request_id(other) == other


def test_trace_nibble_rewrite_still_pairs() -> None:
    s = setup()
    s.joiner.add(exchange("v1", request_id=RID))
    s.joiner.add(exchange("v2", request_id=RID[:14] + "b" + RID[15:]))
    assert s.sink.pairs == [(NS, MODEL, "v2", True, 0.0)]
    other = setup()
    other.joiner.add(exchange("v1", request_id=RID))
    other.joiner.add(exchange("v2", request_id=RID[:20] + "b" + RID[21:]))  # another character: another request
    assert other.sink.pairs == []


def test_the_window_ends_for_a_primary_without_its_shadows() -> None:
    s = setup(shadows=("v2", "v3"), window=70)
    s.joiner.add(exchange("v1"))
    s.clock.now = 10
    s.joiner.add(exchange("v2"))
    s.joiner.expire(70)  # 70 s old: not older than the window yet
    assert s.sink.unpaired_events == []
    s.joiner.expire(70.5)
    assert s.sink.unpaired_events == [(NS, MODEL, "v3", "primary")]
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)
    s.clock.now = 71
    s.joiner.add(exchange("v3"))  # too late: waits for a primary that has gone
    assert s.sink.pairs_by_version() == Counter({"v2": 1})
    s.joiner.expire(141.5)
    assert s.sink.unpaired_events == [(NS, MODEL, "v3", "primary"), (NS, MODEL, "v3", "shadow")]


def test_the_window_ends_for_shadows_without_their_primary() -> None:
    s = setup(shadows=("v2", "v3"), window=5)
    s.joiner.add(exchange("v2", request_id="a"))
    s.clock.now = 3
    s.joiner.add(exchange("v3", request_id="a"))
    s.joiner.add(exchange("v2", request_id="b"))
    s.joiner.expire(5.5)
    assert s.sink.unpaired_events == [(NS, MODEL, "v2", "shadow")]
    s.joiner.expire(8.5)
    assert Counter(s.sink.unpaired_events) == Counter({(NS, MODEL, "v2", "shadow"): 2, (NS, MODEL, "v3", "shadow"): 1})
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)


def test_adding_expires_first() -> None:
    s = setup(window=70)
    s.joiner.add(exchange("v1"))
    s.clock.now = 71
    s.joiner.add(exchange("v2"))  # the primary went before this came
    assert s.sink.pairs == []
    assert s.sink.unpaired_events == [(NS, MODEL, "v2", "primary")]
    assert s.joiner.held == 1


@pytest.mark.parametrize("primary_first", [True, False])
def test_a_non_2xx_primary_drops_it_and_its_shadows(primary_first: bool) -> None:
    s = setup(shadows=("v2", "v3"))
    if primary_first:
        s.joiner.add(exchange("v1", status=503, response=b"upstream connect error"))
        s.joiner.add(exchange("v2"))
    else:
        s.joiner.add(exchange("v2"))
        s.joiner.add(exchange("v1", status=503, response=b"upstream connect error"))
    assert s.sink.drops == Counter({"primary_error": 2})
    assert s.joiner.held == 1  # remembering the failure for v3
    s.joiner.add(exchange("v3"))
    assert s.sink.drops == Counter({"primary_error": 3})
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)  # every shadow seen: nothing more to wait for
    s.joiner.expire(1000)
    assert s.sink.pairs == []
    assert s.sink.unpaired_events == []


def test_a_non_2xx_primary_whose_shadows_never_come() -> None:
    s = setup()
    s.joiner.add(exchange("v1", status=500))
    s.joiner.expire(1000)
    assert s.sink.unpaired_events == []
    assert s.sink.drops == Counter({"primary_error": 1})
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)


def test_an_unreadable_primary_drops_it_and_its_shadows() -> None:
    s = setup()
    s.joiner.add(exchange("v2"))
    s.joiner.add(exchange("v1", response=b"<html>ok</html>"))
    assert s.sink.drops == Counter({"primary_unreadable": 2})
    assert s.sink.pairs == []
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)


def test_a_non_2xx_shadow_disagrees() -> None:
    s = setup()
    s.joiner.add(exchange("v1"))
    s.joiner.add(exchange("v2", status=500, response=AGREEING))
    assert s.sink.pairs == [(NS, MODEL, "v2", False, None)]


def test_a_shadow_of_another_request_is_not_compared() -> None:
    s = setup()
    s.joiner.add(exchange("v1"))
    s.joiner.add(exchange("v2", request=b'{"inputs": []}'))
    assert s.sink.drops == Counter({"request_mismatch": 1})
    assert s.sink.pairs == []
    s.joiner.add(exchange("v2"))  # the real twin still pairs
    assert s.sink.pairs == [(NS, MODEL, "v2", True, 0.0)]


def test_memory_bound_on_waiting_shadows() -> None:
    body = answer(*([0.5] * 100))
    cost = len(body) + HELD_OVERHEAD_BYTES
    limit = 10 * cost + cost // 2  # room for ten
    s = setup(max_buffered=limit, max_body=len(body))
    ids = [f"req-{i}" for i in range(1000)]  # far more than fits
    for rid in ids:
        s.joiner.add(exchange("v2", request_id=rid, response=body))
        assert s.joiner.buffered_bytes <= limit
        assert s.joiner.buffered_bytes == s.joiner.held * cost
    assert s.joiner.held == 10
    assert s.sink.drops == Counter({"memory": 990})
    # Their primaries: the ten held pair (and leave nothing held), the others wait in the room freed.
    for rid in ids[:10]:
        s.joiner.add(exchange("v1", request_id=rid, response=body))
    assert len(s.sink.pairs) == 10
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)


def test_bodies_still_arriving_share_the_memory_bound_with_what_is_held() -> None:
    body = answer(*([0.5] * 100))
    cost = len(body) + HELD_OVERHEAD_BYTES
    s = setup(max_buffered=3 * cost, max_body=len(body))
    s.joiner.add(exchange("v2", request_id="held", response=body))
    assert s.joiner.reserve_in_flight(cost)  # a stream's first chunks
    assert not s.joiner.reserve_in_flight(cost + 1)  # another stream's would pass the bound
    assert s.joiner.buffered_bytes == 2 * cost
    s.joiner.release_in_flight(cost)  # that stream completed (or broke)
    assert s.joiner.buffered_bytes == cost
    assert s.joiner.reserve_in_flight(2 * cost)
    s.joiner.release_in_flight(2 * cost)
    assert (s.joiner.held, s.joiner.buffered_bytes) == (1, cost)


def test_memory_bound_under_random_traffic() -> None:
    rng = random.Random(7)
    limit = 50_000
    s = setup(shadows=("v2", "v3"), max_buffered=limit, max_body=8_000, window=5)
    for step in range(5_000):
        s.clock.now = step * 0.01
        rid = f"r{rng.randrange(2_000)}"
        version = rng.choice(["v1", "v1", "v2", "v3"])
        status = 200 if rng.random() < 0.95 else 500
        response = answer(*([rng.random()] * rng.randrange(1, 900)))
        s.joiner.add(exchange(version, request_id=rid, response=response, status=status))
        assert 0 <= s.joiner.buffered_bytes <= limit
    assert s.sink.drops["memory"] > 0  # the bound was reached
    assert s.sink.drops["body_too_large"] > 0
    s.joiner.expire(1e9)
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)  # the accounting balances once all has gone


def test_a_primary_refused_for_memory_takes_its_shadows_with_it() -> None:
    cost = len(AGREEING) + HELD_OVERHEAD_BYTES
    s = setup(max_buffered=cost + HELD_OVERHEAD_BYTES, max_body=len(AGREEING))  # one exchange, and a refusal
    s.joiner.add(exchange("v1", request_id="a"))
    s.joiner.add(exchange("v1", request_id="b"))  # no room: refused, remembered in the room left
    assert s.sink.drops == Counter({"memory": 1})
    assert s.joiner.buffered_bytes == cost + HELD_OVERHEAD_BYTES
    s.joiner.add(exchange("v2", request_id="b"))  # dropped with its primary, not left waiting
    assert s.sink.drops == Counter({"memory": 2})
    assert s.joiner.buffered_bytes == cost
    s.joiner.add(exchange("v2", request_id="a"))
    s.joiner.add(exchange("v1", request_id="c"))
    s.joiner.add(exchange("v2", request_id="c"))
    assert s.sink.pairs_by_version() == Counter({"v2": 2})
    s.joiner.expire(1e9)
    assert s.sink.unpaired_events == []
    assert (s.joiner.held, s.joiner.buffered_bytes) == (0, 0)


def test_body_too_large() -> None:
    s = setup(max_body=len(AGREEING))
    s.joiner.add(exchange("v1", response=AGREEING))
    s.joiner.add(exchange("v1", request_id="b", response=AGREEING + b" "))
    s.joiner.add(exchange("v2", request_id="c", request=b"x" * (len(AGREEING) + 1)))
    assert s.sink.drops == Counter({"body_too_large": 2})
    assert s.joiner.held == 1


def test_unknown_version_and_no_request_id() -> None:
    s = setup()
    s.joiner.add(exchange("v9"))
    s.joiner.add(exchange("v1", model="other"))
    s.joiner.add(exchange("v1", namespace="other"))
    assert s.sink.drops == Counter({"unknown_version": 3})
    assert not s.joiner.admit(None, MODEL, "v1", RID)
    assert not s.joiner.admit(NS, MODEL, None, RID)
    assert s.sink.drops == Counter({"unknown_version": 5})
    s.joiner.add(exchange("v1", request_id=None))
    s.joiner.add(exchange("v2", request_id=""))
    assert not s.joiner.admit(NS, MODEL, "v1", None)
    assert s.sink.drops == Counter({"unknown_version": 5, "no_request_id": 3})
    assert s.joiner.admit(NS, MODEL, "v1", RID)
    assert s.joiner.admit(NS, MODEL, "v2", RID)
    assert s.joiner.held == 0


def uuids(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]


def test_sampling_keeps_about_the_share_and_both_sides_agree() -> None:
    ids, share = uuids(10_000, seed=1), 0.25
    kept = [rid for rid in ids if sampled(normalise_request_id(rid), share)]
    sd = math.sqrt(len(ids) * share * (1 - share))
    assert abs(len(kept) - len(ids) * share) < 5 * sd
    for rid in ids:
        rewritten = rid[:14] + random.Random(rid).choice("9ab") + rid[15:]
        assert sampled(normalise_request_id(rid), share) == sampled(normalise_request_id(rewritten), share)
    assert all(sampled(normalise_request_id(rid), 1.0) for rid in ids[:100])
    # Nested: what a smaller share keeps, a larger one keeps too.
    small = {rid for rid in ids if sampled(normalise_request_id(rid), 0.1)}
    assert small <= set(kept)


def test_sampling_through_the_joiner_pairs_every_kept_request() -> None:
    ids = uuids(2_000, seed=2)
    s = setup(sample=0.25)
    admitted = 0
    for rid in ids:
        shadow_id = rid[:14] + "a" + rid[15:]
        primary_wanted = s.joiner.admit(NS, MODEL, "v1", rid)
        assert s.joiner.admit(NS, MODEL, "v2", shadow_id) == primary_wanted
        admitted += primary_wanted
        s.joiner.add(exchange("v1", request_id=rid))
        s.joiner.add(exchange("v2", request_id=shadow_id))
    assert len(s.sink.pairs) == admitted
    assert 0.2 * len(ids) < admitted < 0.3 * len(ids)
    s.joiner.expire(1e9)
    assert s.sink.unpaired_events == []
    assert not s.sink.drops  # not sampled is not dropped
