"""The comparator's per-protocol verdicts: what agrees, what does not, and properties that hold for any payload."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from inference_comparator.protocols import (
    PROTOCOLS,
    PrimaryUnreadableError,
    Protocol,
    Tolerances,
    Verdict,
    _Comparison,
    check_primary,
    compare,
)
from rapidfuzz import fuzz

TOL = Tolerances(absolute=1e-6, relative=1e-4, min_text_similarity=0.9)
LOOSE = Tolerances(absolute=0.1, relative=0.0, min_text_similarity=0.9)


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def output(name: str, data: list[Any], shape: list[int] | None = None, datatype: str = "FP32") -> dict[str, Any]:
    return {"name": name, "shape": shape if shape is not None else [len(data)], "datatype": datatype, "data": data}


def v2(*outputs: dict[str, Any], **extra: Any) -> bytes:
    return body({"model_name": "iris", "id": "a", "outputs": list(outputs), **extra})


def verdict(protocol: Protocol, primary: bytes, shadow: bytes, tolerances: Tolerances = TOL) -> Verdict:
    return compare(protocol, primary, shadow, tolerances)


# Open Inference Protocol (v2)


def test_v2_equal_agrees_with_no_difference() -> None:
    doc = v2(output("predict", [0.1, 0.2, 0.3]))
    result = verdict("open-inference-v2", doc, doc)
    assert result == Verdict(agree=True, max_abs_difference=0.0, reason="agree")


def test_v2_ignores_id_model_name_version_and_parameters() -> None:
    primary = v2(output("predict", [1.0]), model_version="1", parameters={"content_type": "np"})
    shadow = body(
        {
            "model_name": "iris-v3",
            "id": "b",
            "model_version": "3",
            "parameters": {"headers": {"x": "y"}},
            "outputs": [output("predict", [1.0])],
        }
    )
    assert verdict("open-inference-v2", primary, shadow).agree


def test_v2_within_tolerance_agrees_and_reports_the_largest_difference() -> None:
    result = verdict("open-inference-v2", v2(output("p", [1.0, 2.0])), v2(output("p", [1.00005, 2.0001])))
    assert result.agree
    assert result.max_abs_difference == pytest.approx(0.0001)


@pytest.mark.parametrize(
    ("primary", "at_bound", "past"),
    [
        (1.0, 1.5, math.nextafter(1.5, math.inf)),  # upwards
        (2.0, 1.5, math.nextafter(1.5, -math.inf)),  # downwards (values within 2x: exact differences)
    ],
)
def test_absolute_tolerance_bound_is_inclusive(primary: float, at_bound: float, past: float) -> None:
    tolerances = Tolerances(absolute=0.5, relative=0.0)
    p = v2(output("p", [primary]))
    assert verdict("open-inference-v2", p, v2(output("p", [at_bound])), tolerances).agree
    result = verdict("open-inference-v2", p, v2(output("p", [past])), tolerances)
    assert not result.agree
    assert "outside tolerance" in result.reason


def test_relative_tolerance_bound_is_inclusive() -> None:
    tolerances = Tolerances(absolute=0.0, relative=0.25)
    p = v2(output("p", [4.0]))
    assert verdict("open-inference-v2", p, v2(output("p", [5.0])), tolerances).agree
    assert not verdict("open-inference-v2", p, v2(output("p", [math.nextafter(5.0, math.inf)])), tolerances).agree


def test_relative_tolerance_scales_with_the_primary() -> None:
    tolerances = Tolerances(absolute=0.0, relative=0.5)
    # |2 - 3.2| = 1.2: more than 0.5 * 2, less than 0.5 * 3.2.
    assert not verdict("open-inference-v2", v2(output("p", [2.0])), v2(output("p", [3.2])), tolerances).agree
    assert verdict("open-inference-v2", v2(output("p", [3.2])), v2(output("p", [2.0])), tolerances).agree


def test_both_tolerances_add_up() -> None:
    tolerances = Tolerances(absolute=0.5, relative=0.25)
    # bound: 0.5 + 0.25 * 2 = 1
    assert verdict("open-inference-v2", v2(output("p", [2.0])), v2(output("p", [3.0])), tolerances).agree
    assert not verdict(
        "open-inference-v2", v2(output("p", [2.0])), v2(output("p", [math.nextafter(3.0, 4.0)])), tolerances
    ).agree


def test_v2_reordered_outputs_and_keys_agree() -> None:
    primary = v2(output("a", [1.0]), output("b", ["x"], datatype="BYTES"))
    shadow = body(
        {
            "outputs": [
                {"data": ["x"], "datatype": "BYTES", "shape": [1], "name": "b"},
                {"shape": [1], "data": [1.0], "name": "a", "datatype": "FP32"},
            ],
            "model_name": "iris",
        }
    )
    assert verdict("open-inference-v2", primary, shadow).agree


def test_v2_nested_and_flat_data_of_one_shape_agree() -> None:
    flat = v2(output("p", [1.0, 2.0, 3.0, 4.0], shape=[2, 2], datatype="INT64"))
    nested = v2(output("p", [[1.0, 2.0], [3.0, 4.0]], shape=[2, 2], datatype="INT64"))
    assert verdict("open-inference-v2", flat, nested).agree


def test_v2_shape_mismatch_disagrees() -> None:
    result = verdict(
        "open-inference-v2",
        v2(output("p", [1.0, 2.0, 3.0, 4.0], shape=[2, 2], datatype="INT64")),
        v2(output("p", [1.0, 2.0, 3.0, 4.0], shape=[4], datatype="INT64")),
    )
    assert not result.agree
    assert "shape differs" in result.reason


def test_v2_datatype_mismatch_disagrees() -> None:
    result = verdict("open-inference-v2", v2(output("p", [1.0])), v2(output("p", [1.0], datatype="FP64")))
    assert not result.agree
    assert "datatype differs" in result.reason


def test_v2_missing_or_extra_output_disagrees() -> None:
    both = v2(output("a", [1.0]), output("b", [2.0]))
    one = v2(output("a", [1.0]))
    for primary, shadow in ((both, one), (one, both)):
        result = verdict("open-inference-v2", primary, shadow)
        assert not result.agree
        assert "output names" in result.reason


def test_nan_equals_nan_and_not_a_number() -> None:
    nan = v2(output("p", [math.nan, 1.0]))
    assert verdict("open-inference-v2", nan, nan).agree
    one_side = verdict("open-inference-v2", nan, v2(output("p", [0.0, 1.0])))
    assert not one_side.agree
    assert one_side.max_abs_difference == math.inf
    assert not verdict("open-inference-v2", v2(output("p", [0.0, 1.0])), nan).agree


def test_infinities() -> None:
    inf = v2(output("p", [math.inf]))
    assert verdict("open-inference-v2", inf, inf) == Verdict(True, 0.0, "agree")
    assert not verdict("open-inference-v2", inf, v2(output("p", [-math.inf]))).agree
    assert not verdict("open-inference-v2", inf, v2(output("p", [1e308]))).agree
    assert not verdict("open-inference-v2", v2(output("p", [1e308])), inf).agree


def test_top1_class_flip_disagrees_within_a_loose_tolerance() -> None:
    scores = v2(output("probabilities", [0.50, 0.49, 0.2, 0.8], shape=[2, 2]))
    flipped = v2(output("probabilities", [0.49, 0.50, 0.2, 0.8], shape=[2, 2]))
    result = verdict("open-inference-v2", scores, flipped, LOOSE)
    assert not result.agree
    assert "top-1 class differs in row 0" in result.reason
    assert result.max_abs_difference == pytest.approx(0.01)
    # The same numbers not shaped as scores (one row vector, or integers) only need to be close.
    assert verdict(
        "open-inference-v2",
        v2(output("p", [0.50, 0.49], shape=[2])),
        v2(output("p", [0.49, 0.50], shape=[2])),
        LOOSE,
    ).agree
    assert verdict(
        "open-inference-v2",
        v2(output("p", [5, 4], shape=[1, 2], datatype="INT64")),
        v2(output("p", [4, 5], shape=[1, 2], datatype="INT64")),
        Tolerances(absolute=1.0, relative=0.0),
    ).agree


def test_bytes_outputs_compare_strings() -> None:
    primary = v2(output("label", ["setosa", "virginica"], datatype="BYTES"))
    assert verdict("open-inference-v2", primary, primary).max_abs_difference is None
    result = verdict("open-inference-v2", primary, v2(output("label", ["setosa", "versicolor"], datatype="BYTES")))
    assert not result.agree
    assert result.max_abs_difference is None


def test_booleans_are_not_numbers() -> None:
    result = verdict(
        "open-inference-v2", v2(output("p", [True], datatype="BOOL")), v2(output("p", [1], datatype="BOOL"))
    )
    assert not result.agree
    assert "boolean against number" in result.reason


def test_v2_non_json_shadow_disagrees_and_non_json_primary_is_not_comparable() -> None:
    good = v2(output("p", [1.0]))
    result = verdict("open-inference-v2", good, b"<html>502</html>")
    assert not result.agree
    assert result.reason == "shadow: body is not JSON"
    with pytest.raises(PrimaryUnreadableError, match="primary: body is not JSON"):
        verdict("open-inference-v2", b"\xff\xfe not json", good)


@pytest.mark.parametrize(
    "doc",
    [
        {"error": "model not ready"},
        [1, 2],
        {"outputs": [{"name": "p", "shape": [2], "datatype": "FP32", "data": [1.0]}]},  # data short of its shape
        {"outputs": [{"name": "p", "shape": [1], "datatype": "FP32"}]},  # no data
        {"outputs": [{"shape": [1], "datatype": "FP32", "data": [1.0]}]},  # no name
        {"outputs": [output("p", [1.0]), output("p", [2.0])]},  # one name twice
        {"outputs": [{"name": "p", "shape": [True], "datatype": "FP32", "data": [1.0]}]},
    ],
)
def test_v2_body_not_of_the_protocol(doc: Any) -> None:
    good = v2(output("p", [1.0]))
    assert not verdict("open-inference-v2", good, body(doc)).agree
    with pytest.raises(PrimaryUnreadableError):
        verdict("open-inference-v2", body(doc), good)
    with pytest.raises(PrimaryUnreadableError):
        check_primary("open-inference-v2", body(doc))
    check_primary("open-inference-v2", good)


def test_reasons_never_carry_payload_values() -> None:
    secret_text, secret_number = "SECRET-label-7f3a", 12345.678
    cases: list[tuple[Protocol, bytes, bytes]] = [
        (
            "open-inference-v2",
            v2(output("SECRET-name", [secret_number])),
            v2(output("SECRET-name", [secret_number + 100])),
        ),
        (
            "open-inference-v2",
            v2(output("n", [secret_text], datatype="BYTES")),
            v2(output("n", ["x"], datatype="BYTES")),
        ),
        ("json", body({secret_text: [secret_number]}), body({secret_text: ["x"]})),
        ("json", body({secret_text: 1}), body({"other": 1})),
        (
            "openai",
            body({"choices": [{"index": 0, "text": secret_text}]}),
            body({"choices": [{"index": 0, "text": "z"}]}),
        ),
    ]
    for protocol, primary, shadow in cases:
        result = verdict(protocol, primary, shadow)
        assert not result.agree
        for secret in ("SECRET", "12345", "7f3a"):
            assert secret not in result.reason


# TensorFlow Serving


def test_tfserving_rows_and_columns() -> None:
    rows = body({"predictions": [[0.1, 0.9], [0.8, 0.2]]})
    assert verdict("tfserving", rows, rows).agree
    assert verdict("tfserving", rows, body({"predictions": [[0.10001, 0.9], [0.8, 0.2]]})).agree
    outside = verdict("tfserving", rows, body({"predictions": [[0.2, 0.9], [0.8, 0.2]]}))
    assert not outside.agree
    assert outside.max_abs_difference == pytest.approx(0.1)
    columns = body({"outputs": {"scores": [0.1, 0.9], "classes": ["a", "b"]}})
    assert verdict("tfserving", columns, body({"outputs": {"classes": ["a", "b"], "scores": [0.1, 0.9]}})).agree
    mixed = verdict("tfserving", rows, body({"outputs": [[0.1, 0.9], [0.8, 0.2]]}))
    assert not mixed.agree
    assert "row format" in mixed.reason


def test_tfserving_structure_must_match() -> None:
    rows = body({"predictions": [[0.1, 0.9], [0.8, 0.2]]})
    assert not verdict("tfserving", rows, body({"predictions": [[0.1, 0.9]]})).agree  # fewer rows
    assert not verdict("tfserving", rows, body({"predictions": [0.1, 0.9, 0.8, 0.2]})).agree  # flat
    assert not verdict("tfserving", rows, body({"predictions": [[0.1, 0.9], [0.8, "0.2"]]})).agree


def test_tfserving_nan_inf_and_bodies_not_of_the_protocol() -> None:
    doc = body({"predictions": [math.nan, math.inf, -math.inf]})
    assert verdict("tfserving", doc, doc).agree
    assert not verdict("tfserving", doc, body({"predictions": [1.0, math.inf, -math.inf]})).agree
    assert not verdict("tfserving", doc, b"not json").agree
    assert "tfserving" in verdict("tfserving", doc, body({"error": "x"})).reason
    with pytest.raises(PrimaryUnreadableError):
        verdict("tfserving", body({"error": "Servable not found"}), doc)
    with pytest.raises(PrimaryUnreadableError):
        verdict("tfserving", body({"predictions": [1], "outputs": [1]}), doc)
    with pytest.raises(PrimaryUnreadableError):
        verdict("tfserving", b"", doc)


# TorchServe


def test_json_any_json() -> None:
    doc = body({"label": "cat", "scores": {"cat": 0.9, "dog": 0.1}, "boxes": [[1, 2, 3, 4]], "ok": True, "note": None})
    assert verdict("json", doc, doc).agree
    reordered = body(
        {"boxes": [[1, 2, 3, 4]], "note": None, "ok": True, "scores": {"dog": 0.1, "cat": 0.9}, "label": "cat"}
    )
    assert verdict("json", doc, reordered).agree
    close = body(
        {"label": "cat", "scores": {"cat": 0.90001, "dog": 0.1}, "boxes": [[1, 2, 3, 4]], "ok": True, "note": None}
    )
    assert verdict("json", doc, close).agree


@pytest.mark.parametrize(
    ("shadow", "reason"),
    [
        ({"label": "dog", "score": 0.9}, "different strings"),
        ({"label": "cat", "score": 0.5}, "outside tolerance"),
        ({"label": "cat", "score": "0.9"}, "number against string"),
        ({"label": "cat", "score": 0.9, "extra": 1}, "different keys"),
        ({"label": "cat"}, "different keys"),
        ({"label": ["cat"], "score": 0.9}, "string against array"),
        ({"label": None, "score": 0.9}, "string against null"),
    ],
)
def test_json_differences(shadow: dict[str, Any], reason: str) -> None:
    result = verdict("json", body({"label": "cat", "score": 0.9}), body(shadow))
    assert not result.agree
    assert reason in result.reason


def test_json_lists_and_booleans() -> None:
    assert not verdict("json", body([1, 2, 3]), body([1, 2])).agree
    assert not verdict("json", body([True]), body([1])).agree
    assert not verdict("json", body([False]), body([True])).agree
    assert verdict("json", body([1]), body([1.0])).agree  # JSON has one number type
    assert not verdict("json", body([1]), b"[1").agree
    with pytest.raises(PrimaryUnreadableError):
        verdict("json", b"\x89PNG", body([1]))


def test_integers_beyond_float_range_compare_exactly() -> None:
    big = 10**400
    assert verdict("json", body([big]), body([big])).agree
    assert not verdict("json", body([big]), body([big + 1])).agree


# OpenAI-compatible


def completion(*texts: str, **extra: Any) -> bytes:
    return body(
        {
            "id": "cmpl-1",
            "created": 1,
            "model": "m",
            "choices": [{"index": i, "text": t, "finish_reason": "stop"} for i, t in enumerate(texts)],
            **extra,
        }
    )


def chat(*contents: str | None) -> bytes:
    return body(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": i, "message": {"role": "assistant", "content": c}} for i, c in enumerate(contents)],
        }
    )


def test_openai_exactly_equal_text_agrees() -> None:
    primary = completion("The answer is 42.", usage={"total_tokens": 5}, system_fingerprint="a")
    shadow = body(
        {
            "id": "cmpl-2",
            "created": 2,
            "model": "other",
            "usage": {"total_tokens": 9},
            "system_fingerprint": "b",
            "choices": [{"index": 0, "text": "The answer is 42.", "finish_reason": "length"}],
        }
    )
    result = verdict("openai", primary, shadow)
    assert result == Verdict(True, None, "agree")


def test_openai_near_text_agrees_far_text_disagrees() -> None:
    primary = chat("The capital of France is Paris, a city on the Seine.")
    near = chat("The capital of France is Paris, a city on the Seine!")
    far = chat("I cannot help with that request.")
    assert verdict("openai", primary, near).agree
    result = verdict("openai", primary, far)
    assert not result.agree
    assert "similarity" in result.reason


def test_openai_similarity_bound_is_inclusive() -> None:
    a, b = "the quick brown fox", "the quick brown cat"
    ratio = fuzz.ratio(a, b) / 100
    assert 0 < ratio < 1
    assert verdict("openai", completion(a), completion(b), Tolerances(min_text_similarity=ratio)).agree
    assert not verdict(
        "openai", completion(a), completion(b), Tolerances(min_text_similarity=math.nextafter(ratio, 1.0))
    ).agree


def test_openai_whitespace_is_normalised() -> None:
    exact = Tolerances(min_text_similarity=1.0)
    assert verdict("openai", completion("a  b\n c "), completion("a b c"), exact).agree
    assert not verdict("openai", completion("a b c"), completion("a b d"), exact).agree


def test_openai_choices_matched_by_index() -> None:
    primary = completion("first", "second")
    shadow = body({"choices": [{"index": 1, "text": "second"}, {"index": 0, "text": "first"}]})
    assert verdict("openai", primary, shadow).agree
    swapped = body({"choices": [{"index": 1, "text": "first"}, {"index": 0, "text": "second"}]})
    assert not verdict("openai", primary, swapped).agree


def test_openai_different_number_of_choices_disagrees() -> None:
    result = verdict("openai", completion("a", "b"), completion("a"))
    assert not result.agree
    assert "numbers of choices" in result.reason
    other_index = body({"choices": [{"index": 0, "text": "a"}, {"index": 5, "text": "b"}]})
    assert "indexes" in verdict("openai", completion("a", "b"), other_index).reason


def test_openai_chat_against_completion_and_missing_content() -> None:
    assert not verdict("openai", chat("hello"), completion("hello")).agree
    assert verdict("openai", chat(None), chat(None)).agree
    assert not verdict("openai", chat(None), chat("hello")).agree


def test_openai_streamed_response_is_read_whole() -> None:
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"content": "Hello, "}}]},
        {"choices": [{"index": 0, "delta": {"content": "world."}}]},
    ]
    stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode() + b"data: [DONE]\n\n"
    assert verdict("openai", stream, chat("Hello, world.")).agree
    assert verdict("openai", chat("Hello, world."), stream).agree
    assert not verdict("openai", stream, chat("Goodbye.")).agree


def test_openai_bodies_not_of_the_protocol() -> None:
    good = completion("x")
    assert verdict("openai", good, b"Internal Server Error").reason == "shadow: body is not JSON"
    assert not verdict("openai", good, body({"object": "error"})).agree
    with pytest.raises(PrimaryUnreadableError):
        verdict("openai", b"Internal Server Error", good)
    with pytest.raises(PrimaryUnreadableError):
        verdict("openai", body({"choices": [{"text": "no index"}]}), good)
    with pytest.raises(PrimaryUnreadableError):
        verdict("openai", body({"choices": [{"index": 0, "text": "a"}, {"index": 0, "text": "b"}]}), good)


# Properties, for any payload of each protocol.

NUMBER_BOUND = 1e6
finite = st.floats(min_value=-NUMBER_BOUND, max_value=NUMBER_BOUND, allow_nan=False, allow_infinity=False)
any_float = st.floats(allow_nan=True, allow_infinity=True)
integers = st.integers(min_value=-(2**53), max_value=2**53)
names = st.text(min_size=1, max_size=8)


@st.composite
def v2_output(draw: st.DrawFn, name: str) -> dict[str, Any]:
    datatype = draw(st.sampled_from(["FP32", "FP64", "INT64", "BYTES", "BOOL"]))
    shape = draw(st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=3))
    size = math.prod(shape)
    element = {
        "FP32": st.one_of(finite, any_float),
        "FP64": st.one_of(finite, any_float),
        "INT64": integers,
        "BYTES": st.text(max_size=5),
        "BOOL": st.booleans(),
    }[datatype]
    data: list[Any] = draw(st.lists(element, min_size=size, max_size=size))
    if len(shape) == 2 and draw(st.booleans()):  # nested rows
        data = [data[i * shape[1] : (i + 1) * shape[1]] for i in range(shape[0])]
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


@st.composite
def v2_payload(draw: st.DrawFn) -> dict[str, Any]:
    output_names = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    return {
        "model_name": draw(names),
        "id": draw(names),
        "outputs": [draw(v2_output(name)) for name in output_names],
    }


json_scalars = st.one_of(st.none(), st.booleans(), integers, finite, any_float, st.text(max_size=5))
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)


@st.composite
def tfserving_payload(draw: st.DrawFn) -> dict[str, Any]:
    return {draw(st.sampled_from(["predictions", "outputs"])): draw(json_values)}


@st.composite
def openai_payload(draw: st.DrawFn) -> dict[str, Any]:
    indexes = draw(st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=4, unique=True))
    as_chat = draw(st.booleans())
    choices: list[dict[str, Any]] = []
    for index in indexes:
        text = draw(st.text(max_size=30))
        if as_chat:
            choices.append({"index": index, "message": {"role": "assistant", "content": text}})
        else:
            choices.append({"index": index, "text": text})
    return {"id": draw(names), "created": draw(integers), "choices": choices}


PAYLOADS: dict[Protocol, st.SearchStrategy[Any]] = {
    "open-inference-v2": v2_payload(),
    "tfserving": tfserving_payload(),
    "json": json_values,
    "openai": openai_payload(),
}


def number_paths(protocol: Protocol, doc: Any) -> list[tuple[Any, ...]]:
    """Paths to the finite numbers the protocol compares."""
    paths: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            if math.isfinite(value):
                paths.append(path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, (*path, i))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))

    if protocol == "open-inference-v2":
        for i, out in enumerate(doc["outputs"]):
            walk(out["data"], ("outputs", i, "data"))
    elif protocol == "tfserving":
        for key in doc:
            walk(doc[key], (key,))
    elif protocol == "json":
        walk(doc, ())
    return paths


def replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copy = list(doc) if isinstance(doc, list) else dict(doc)
    copy[path[0]] = replaced(doc[path[0]], path[1:], value)
    return copy


def get(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def shuffled(doc: Any, rng: random.Random) -> Any:
    """The same document with every object's keys in another order."""
    if isinstance(doc, list):
        return [shuffled(item, rng) for item in doc]
    if isinstance(doc, dict):
        keys = list(doc)
        rng.shuffle(keys)
        return {key: shuffled(doc[key], rng) for key in keys}
    return doc


def perturbation(a: float, tolerances: Tolerances) -> float:
    """A number certainly further from `a` than the tolerances allow."""
    return float(a) + 2 * (tolerances.absolute + tolerances.relative * abs(float(a))) + 1


PROPERTY_SETTINGS = settings(max_examples=150, deadline=None)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_property_a_payload_agrees_with_itself(protocol: Protocol) -> None:
    @PROPERTY_SETTINGS
    @given(doc=PAYLOADS[protocol])
    def check(doc: Any) -> None:
        result = verdict(protocol, body(doc), body(doc))
        assert result.agree, result.reason
        assert result.max_abs_difference in (None, 0.0)

    check()


@pytest.mark.parametrize("protocol", ["open-inference-v2", "tfserving", "json"])
def test_property_one_number_past_the_tolerance_disagrees(protocol: Protocol) -> None:
    @PROPERTY_SETTINGS
    @given(doc=PAYLOADS[protocol], data=st.data())
    def check(doc: Any, data: st.DataObject) -> None:
        paths = number_paths(protocol, doc)
        assume(paths)
        path = data.draw(st.sampled_from(paths))
        shadow = replaced(doc, path, perturbation(get(doc, path), TOL))
        result = verdict(protocol, body(doc), body(shadow))
        assert not result.agree
        assert result.max_abs_difference is not None
        assert result.max_abs_difference > TOL.absolute

    check()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_property_reordering_object_keys_never_changes_the_verdict(protocol: Protocol) -> None:
    @PROPERTY_SETTINGS
    @given(doc=PAYLOADS[protocol], data=st.data(), rng=st.randoms(use_true_random=False))
    def check(doc: Any, data: st.DataObject, rng: random.Random) -> None:
        shadow = doc
        paths = number_paths(protocol, doc)
        if len(paths) > 0 and data.draw(st.booleans()):
            path = data.draw(st.sampled_from(paths))
            shadow = replaced(doc, path, perturbation(get(doc, path), TOL))
        if protocol == "openai" and data.draw(st.booleans()):
            choice = doc["choices"][0]
            changed = {**choice, "text": "something else entirely"} if "text" in choice else choice
            shadow = {**doc, "choices": [changed, *doc["choices"][1:]]}
        before = verdict(protocol, body(doc), body(shadow))
        after = verdict(protocol, body(shuffled(doc, rng)), body(shuffled(shadow, rng)))
        assert (after.agree, after.max_abs_difference) == (before.agree, before.max_abs_difference)

    check()


@PROPERTY_SETTINGS
@given(doc=v2_payload(), rng=st.randoms(use_true_random=False))
def test_property_v2_output_order_never_changes_the_verdict(doc: dict[str, Any], rng: random.Random) -> None:
    outputs = list(doc["outputs"])
    rng.shuffle(outputs)
    result = verdict("open-inference-v2", body(doc), body({**doc, "outputs": outputs}))
    assert result.agree, result.reason


NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.sampled_from([0.0, -0.0, 1.0, 1.0 + 1e-5, 1e-7]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(NUMBERS, NUMBERS), max_size=30))
def test_a_tensors_tight_loop_judges_as_comparing_number_by_number(pairs: list[tuple[Any, Any]]) -> None:
    """The fast path for plain numeric tensors gives the same verdict, largest difference and
    reason as comparing item by item, or declines (NaN, infinities, huge integers) and leaves
    item by item to do it."""
    primary, shadow = [a for a, _ in pairs], [b for _, b in pairs]
    fast, slow = _Comparison(Tolerances()), _Comparison(Tolerances())
    taken = fast.plain_numbers(primary, shadow, "outputs[0].data")
    for j, (a, b) in enumerate(pairs):
        slow.json(a, b, f"outputs[0].data[{j}]")
    if taken:
        assert fast.verdict() == slow.verdict()
    else:
        assert (fast.reason, fast.max_abs_difference) == (None, None)
        finite = all(
            (isinstance(x, float) and math.isfinite(x)) or (isinstance(x, int) and abs(x) < 2**1023)
            for x in [*primary, *shadow]
        )
        assert not finite or any(not math.isfinite(float(a) - float(b)) for a, b in pairs)
