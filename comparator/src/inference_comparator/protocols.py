"""Whether a shadow's response body says the same as the primary's, per serving protocol.

Pure functions, no I/O. Numbers are close when `abs(a - b) <= absolute + relative * abs(a)`, `a` the
primary's (numpy.isclose); NaN equals NaN, an infinity equals the same infinity; booleans are not
numbers. A verdict's reason says where (positions, never names or values) and what kind of
difference it found: it never carries payload values, so it is safe to log.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from rapidfuzz import fuzz

# The platform names the same protocols (inference_platform.serving.analysis_spec: a test there
# holds the two lists, and their aliases, equal).
Protocol = Literal["open-inference-v2", "tfserving", "json", "openai"]
PROTOCOLS: Final[tuple[Protocol, ...]] = get_args(Protocol)
# Former names, still read as the protocol each names now (the first release, 0.1.0, read any
# JSON only as `torchserve`).
ALIASES: Final[Mapping[str, Protocol]] = MappingProxyType({"torchserve": "json"})

_PLAIN: Final = frozenset({int, float})
_SCALARS: Final = frozenset({int, float, bool, str, type(None)})
# Open Inference Protocol (v2) datatypes whose last dimension, when more than one wide, holds
# per-class scores: the index of each row's largest score (its top-1 class) must agree too.
_SCORE_DATATYPES: Final = frozenset({"FP16", "FP32", "FP64"})


@dataclass(frozen=True)
class Tolerances:
    """How far the shadow may be from the primary and still agree."""

    absolute: float = 1e-6
    relative: float = 1e-4
    min_text_similarity: float = 0.9


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing one shadow response with its primary's."""

    agree: bool
    # The largest absolute difference of any pair of numbers compared (inf where one side was NaN
    # or infinite and the other not); None when no numbers were compared.
    max_abs_difference: float | None
    reason: str


class PrimaryUnreadableError(ValueError):
    """The primary's body is not JSON, or not the protocol's shape: there is nothing to compare with."""


class _MalformedError(ValueError):
    """A body not of the protocol's shape; the message says how, without its values."""


def compare(protocol: Protocol, primary: bytes, shadow: bytes, tolerances: Tolerances) -> Verdict:
    """Compare a shadow's response body with the primary's. Raises PrimaryUnreadableError when the
    primary's body cannot be read as `protocol`; a shadow body that cannot disagrees."""
    parse, compare_parsed = _SPECS[protocol]
    try:
        primary_doc = parse(primary)
    except _MalformedError as error:
        raise PrimaryUnreadableError(f"primary: {error}") from None
    try:
        shadow_doc = parse(shadow)
    except _MalformedError as error:
        return Verdict(agree=False, max_abs_difference=None, reason=f"shadow: {error}")
    comparison = _Comparison(tolerances)
    try:
        compare_parsed(primary_doc, shadow_doc, comparison)
    except RecursionError:
        raise PrimaryUnreadableError("primary: nested too deeply to compare") from None
    return comparison.verdict()


def check_primary(protocol: Protocol, primary: bytes) -> None:
    """Raise PrimaryUnreadableError unless `primary` can be read as a response of `protocol`."""
    parse, _ = _SPECS[protocol]
    try:
        parse(primary)
    except _MalformedError as error:
        raise PrimaryUnreadableError(f"primary: {error}") from None


class _Comparison:
    """Walks two parsed documents, keeping the first difference found and the largest numeric gap."""

    def __init__(self, tolerances: Tolerances) -> None:
        self.tolerances = tolerances
        self.max_abs_difference: float | None = None
        self.reason: str | None = None

    def fail(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def _record(self, difference: float) -> None:
        if self.max_abs_difference is None or difference > self.max_abs_difference:
            self.max_abs_difference = difference

    def number(self, a: float, b: float, where: str) -> None:
        """Compare the primary's number `a` with the shadow's `b`."""
        try:
            fa, fb = float(a), float(b)
        except OverflowError:  # integers beyond a float's range: only equal ones agree
            self._record(0.0 if a == b else math.inf)
            if a != b:
                self.fail(f"{where}: number outside tolerance")
            return
        if math.isnan(fa) or math.isnan(fb) or math.isinf(fa) or math.isinf(fb):
            same = (math.isnan(fa) and math.isnan(fb)) or fa == fb
            self._record(0.0 if same else math.inf)
            if not same:
                self.fail(f"{where}: NaN or infinity against a different number")
            return
        difference = abs(fa - fb)
        self._record(difference)
        if difference > self.tolerances.absolute + self.tolerances.relative * abs(fa):
            self.fail(f"{where}: number outside tolerance")

    def plain_numbers(self, a: list[Any], b: list[Any], where: str) -> bool:
        """Compare two equally long lists of finite ints and floats (the usual tensor) in one tight
        loop, as number() would item by item. False, having recorded nothing, when either holds
        anything else (a bool, a string, NaN, an infinity, an integer past a float's range): the
        caller then compares item by item."""
        if not set(map(type, a)) <= _PLAIN or not set(map(type, b)) <= _PLAIN:  # bool is not int here
            return False
        absolute, relative = self.tolerances.absolute, self.tolerances.relative
        worst, outside = 0.0, None
        try:
            for j, (x, y) in enumerate(zip(a, b, strict=True)):
                difference = abs(x - y)
                if not difference <= worst:  # larger, or NaN (an infinity or NaN was in it)
                    if not math.isfinite(difference):
                        return False
                    worst = difference
                if outside is None and difference > absolute + relative * abs(x):
                    outside = j
            worst = float(worst)
        except OverflowError:
            return False
        if a:
            self._record(worst)
        if outside is not None:
            self.fail(f"{where}[{outside}]: number outside tolerance")
        return True

    def json(self, a: Any, b: Any, where: str) -> None:
        """Compare two JSON values: same structure, numbers within tolerance, everything else equal."""
        kind_a, kind_b = _kind(a), _kind(b)
        if kind_a != kind_b:
            self.fail(f"{where}: {kind_a} against {kind_b}")
        elif kind_a == "number":
            self.number(a, b, where)
        elif kind_a == "array":
            if len(a) != len(b):
                self.fail(f"{where}: arrays of different lengths")
                return
            for i, (item_a, item_b) in enumerate(zip(a, b, strict=True)):
                self.json(item_a, item_b, f"{where}[{i}]")
        elif kind_a == "object":
            if a.keys() != b.keys():
                self.fail(f"{where}: objects with different keys")
                return
            # Members by their position among the sorted keys: the keys may be payload.
            for i, key in enumerate(sorted(a)):
                self.json(a[key], b[key], f"{where}{{{i}}}")
        elif a != b:
            self.fail(f"{where}: different {kind_a}s")

    def verdict(self) -> Verdict:
        if self.reason is None:
            return Verdict(agree=True, max_abs_difference=self.max_abs_difference, reason="agree")
        return Verdict(agree=False, max_abs_difference=self.max_abs_difference, reason=self.reason)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    return "object"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _load(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise _MalformedError("body is not JSON") from None


# Open Inference Protocol (v2): MLServer, Triton.


@dataclass(frozen=True)
class _Tensor:
    position: int  # in the response's outputs list
    shape: tuple[int, ...]
    datatype: str
    data: list[Any]  # flattened


def _flatten(data: list[Any]) -> Iterator[Any]:
    for item in data:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item


def _parse_v2(body: bytes) -> dict[str, _Tensor]:
    doc = _load(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("outputs"), list):
        raise _MalformedError("not an open-inference-v2 response (no outputs list)")
    tensors: dict[str, _Tensor] = {}
    for i, output in enumerate(doc["outputs"]):
        where = f"outputs[{i}]"
        if not isinstance(output, dict):
            raise _MalformedError(f"{where} is not an object")
        name, shape, datatype, data = (output.get(key) for key in ("name", "shape", "datatype", "data"))
        if not isinstance(name, str):
            raise _MalformedError(f"{where} has no name")
        if name in tensors:
            raise _MalformedError(f"{where} repeats the name of outputs[{tensors[name].position}]")
        if not isinstance(shape, list) or not all(_is_count(d) for d in shape):
            raise _MalformedError(f"{where} has no shape of non-negative integers")
        if not isinstance(datatype, str):
            raise _MalformedError(f"{where} has no datatype")
        if not isinstance(data, list):
            raise _MalformedError(f"{where} has no data array")
        flat = list(_flatten(data)) if not set(map(type, data)) <= _SCALARS else data
        if len(flat) != math.prod(shape):
            raise _MalformedError(f"{where} has data that does not fill its shape")
        tensors[name] = _Tensor(position=i, shape=tuple(shape), datatype=datatype, data=flat)
    return tensors


def _top1(row: list[Any]) -> int | None:
    """The index of the row's first largest number; None when the row is not all numbers (or has a NaN)."""
    if not all(_is_number(x) for x in row):
        return None
    try:
        values = [float(x) for x in row]
    except OverflowError:
        return None
    if any(math.isnan(x) for x in values):
        return None
    return max(range(len(values)), key=values.__getitem__)


def _plain_top1(row: list[float]) -> int:
    """_top1 of a row already known to be finite ints and floats: the first of its largest."""
    return row.index(max(row))


def _compare_v2(primary: dict[str, _Tensor], shadow: dict[str, _Tensor], comparison: _Comparison) -> None:
    if primary.keys() != shadow.keys():
        comparison.fail("outputs: different sets of output names")
        return
    for name in sorted(primary, key=lambda n: primary[n].position):
        p, s = primary[name], shadow[name]
        where = f"outputs[{p.position}]"
        if p.datatype != s.datatype:
            comparison.fail(f"{where}: datatype differs")
            continue
        if p.shape != s.shape:
            comparison.fail(f"{where}: shape differs")
            continue
        plain = comparison.plain_numbers(p.data, s.data, f"{where}.data")
        if not plain:
            for j, (a, b) in enumerate(zip(p.data, s.data, strict=True)):
                comparison.json(a, b, f"{where}.data[{j}]")
        if p.datatype in _SCORE_DATATYPES and len(p.shape) >= 2 and p.shape[-1] > 1:
            width = p.shape[-1]
            top1 = _plain_top1 if plain else _top1
            for row in range(len(p.data) // width):
                top_p = top1(p.data[row * width : (row + 1) * width])
                top_s = top1(s.data[row * width : (row + 1) * width])
                if top_p is not None and top_s is not None and top_p != top_s:
                    comparison.fail(f"{where}: top-1 class differs in row {row}")
                    break


# TensorFlow Serving's REST API: {"predictions": ...} (row format) or {"outputs": ...} (columnar).


def _parse_tfserving(body: bytes) -> tuple[str, Any]:
    doc = _load(body)
    if not isinstance(doc, dict):
        raise _MalformedError("not a tfserving response (not an object)")
    keys = [key for key in ("predictions", "outputs") if key in doc]
    if len(keys) != 1:
        raise _MalformedError("not a tfserving response (needs exactly one of predictions, outputs)")
    return keys[0], doc[keys[0]]


def _compare_tfserving(primary: tuple[str, Any], shadow: tuple[str, Any], comparison: _Comparison) -> None:
    if primary[0] != shadow[0]:
        comparison.fail("tfserving: one side answered in row format, the other columnar")
        return
    comparison.json(primary[1], shadow[1], f"$.{primary[0]}")


# Any JSON (TorchServe's handlers, custom servers, transformers): whatever the server returns.


def _compare_json(primary: Any, shadow: Any, comparison: _Comparison) -> None:
    comparison.json(primary, shadow, "$")


# OpenAI-compatible completions and chat completions (vLLM and the like), whole or streamed (SSE).

# A choice: its kind ("text" for completions, "chat") and its text (None: a chat message without content).
_Choice = tuple[Literal["text", "chat"], str | None]


def _choice(choice: Any, where: str, streamed: bool) -> tuple[int, _Choice]:
    if not isinstance(choice, dict):
        raise _MalformedError(f"{where} is not an object")
    index = choice.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise _MalformedError(f"{where} has no integer index")
    if "text" in choice:
        text = choice["text"]
        if not isinstance(text, str):
            raise _MalformedError(f"{where} has a text that is not a string")
        return index, ("text", text)
    message = choice.get("delta" if streamed else "message")
    if not isinstance(message, dict):
        raise _MalformedError(f"{where} has neither text nor message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _MalformedError(f"{where} has a content that is not a string")
    return index, ("chat", content)


def _parse_openai(body: bytes) -> dict[int, _Choice]:
    if body.lstrip().startswith(b"data:"):
        return _parse_openai_stream(body)
    doc = _load(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        raise _MalformedError("not an openai response (no choices list)")
    choices: dict[int, _Choice] = {}
    for i, raw in enumerate(doc["choices"]):
        index, choice = _choice(raw, f"choices[{i}]", streamed=False)
        if index in choices:
            raise _MalformedError(f"choices[{i}] repeats an index")
        choices[index] = choice
    return choices


def _parse_openai_stream(body: bytes) -> dict[int, _Choice]:
    """A streamed response (server-sent events): each choice's text is the concatenation of its deltas."""
    try:
        lines = body.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise _MalformedError("body is not UTF-8") from None
    kinds: dict[int, Literal["text", "chat"]] = {}
    parts: dict[int, list[str]] = {}
    for number, line in enumerate(lines):
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            break
        chunk = _load(data.encode())
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            raise _MalformedError(f"event on line {number} is not an openai chunk")
        for i, raw in enumerate(chunk["choices"]):
            index, (kind, text) = _choice(raw, f"line {number} choices[{i}]", streamed=True)
            if kinds.setdefault(index, kind) != kind:
                raise _MalformedError(f"line {number} choices[{i}] changes kind")
            parts.setdefault(index, [])
            if text is not None:
                parts[index].append(text)
    if not kinds:
        raise _MalformedError("stream without choices")
    return {index: (kinds[index], "".join(parts[index])) for index in kinds}


def _compare_openai(primary: dict[int, _Choice], shadow: dict[int, _Choice], comparison: _Comparison) -> None:
    if len(primary) != len(shadow):
        comparison.fail("choices: different numbers of choices")
        return
    if primary.keys() != shadow.keys():
        comparison.fail("choices: different indexes")
        return
    minimum = comparison.tolerances.min_text_similarity
    for index in sorted(primary):
        (kind_p, text_p), (kind_s, text_s) = primary[index], shadow[index]
        where = f"choices[index={index}]"
        if kind_p != kind_s:
            comparison.fail(f"{where}: a completion against a chat message")
        elif text_p == text_s:
            continue
        elif text_p is None or text_s is None:
            comparison.fail(f"{where}: content on one side only")
        else:
            similarity = fuzz.ratio(" ".join(text_p.split()), " ".join(text_s.split())) / 100
            if similarity < minimum:
                comparison.fail(f"{where}: text similarity {similarity:.3f} below {minimum}")


_Spec = tuple[Callable[[bytes], Any], Callable[[Any, Any, _Comparison], None]]
_SPECS: Final[dict[Protocol, _Spec]] = {
    "open-inference-v2": (_parse_v2, _compare_v2),
    "tfserving": (_parse_tfserving, _compare_tfserving),
    "json": (_load, _compare_json),
    "openai": (_parse_openai, _compare_openai),
}
