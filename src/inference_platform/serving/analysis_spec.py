"""What a model says about judging its versions: the thresholds its canaries and shadows are held
to against the primary (errors, latency and, for LLM engines, time to first token and time per output
token), read by the alerting rules and `infra analyze` (analysis/comparison.py),
and whether its shadows' answers are compared with the primary's (payload_capture.py)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Final, Literal, get_args

from pydantic import Field, field_validator

from inference_platform.config.base import ConfigModel, Duration

# How the comparator reads an answer: Open Inference Protocol v2 (MLServer, Triton), TF Serving's
# REST predict, any JSON (TorchServe's handlers, custom servers and transformers answer what they
# like), OpenAI completions. The comparator's package names the same (inference_comparator.protocols;
# tests/serving/test_payload_protocols.py holds the two lists, and their aliases, equal).
PayloadProtocol = Literal["open-inference-v2", "tfserving", "json", "openai"]
PAYLOAD_PROTOCOLS: Final[tuple[PayloadProtocol, ...]] = get_args(PayloadProtocol)
# Former names a stack may still write, each read as the protocol it names now.
PayloadProtocolAlias = Literal["torchserve"]
PAYLOAD_PROTOCOL_ALIASES: Final[Mapping[PayloadProtocolAlias, PayloadProtocol]] = MappingProxyType(
    {"torchserve": "json"}
)
_BY_NAME: Final[dict[PayloadProtocol | PayloadProtocolAlias, PayloadProtocol]] = {p: p for p in PAYLOAD_PROTOCOLS}
_BY_NAME.update(PAYLOAD_PROTOCOL_ALIASES.items())


def current_protocol(name: PayloadProtocol | PayloadProtocolAlias) -> PayloadProtocol:
    """The protocol a name means: itself, or the protocol a former name names now."""
    return _BY_NAME[name]


class PayloadComparison(ConfigModel):
    """Compare what each shadow answers with what the primary answered to the same request."""

    enabled: bool = Field(
        default=False,
        description="Compare each shadow's answers with the primary's (needs a shadow); "
        "deploys the payload comparator.",
    )
    min_agreement: Annotated[float, Field(gt=0, le=1)] = Field(
        default=0.99, description="The share of paired requests a shadow must answer as the primary did."
    )
    min_pairs: Annotated[int, Field(ge=1, le=100_000_000)] = Field(
        default=100, description="Fewer pairs than this in the window is too little to judge."
    )
    absolute_tolerance: Annotated[float, Field(ge=0)] = Field(
        default=1e-6, description="Numbers agree within absoluteTolerance + relativeTolerance x |primary's|."
    )
    relative_tolerance: Annotated[float, Field(ge=0)] = Field(
        default=1e-4,
        description="Numbers agree when |a - b| <= absoluteTolerance + relativeTolerance * |a|, a the primary's.",
    )
    min_text_similarity: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.9, description="Texts that differ agree when their normalised similarity is at least this."
    )
    sample: Annotated[float, Field(gt=0, le=1)] = Field(
        default=1.0, description="The share of request ids compared (chosen by a hash of the id)."
    )
    protocol: Literal[PayloadProtocol, PayloadProtocolAlias] | None = Field(
        default=None,
        description="How answers are read; by default the runtime's (`json`, any JSON, behind a transformer). "
        "`torchserve` is `json`'s former name, read as `json`.",
    )

    @field_validator("protocol")
    @classmethod
    def _current_name(cls, name: PayloadProtocol | PayloadProtocolAlias | None) -> PayloadProtocol | None:
        return None if name is None else current_protocol(name)


class AnalysisSpec(ConfigModel):
    """How a canary or shadow is judged against the model's primary (alerts and `infra analyze`)."""

    window: Duration = Field(default="10m", description="The span compared, ending now (or at `--at`).")
    min_requests: Annotated[int, Field(ge=1, le=100_000_000)] = Field(
        default=100, description="Fewer requests than this, for a version or the primary, is too little to judge."
    )
    max_error_ratio_increase: Annotated[float, Field(ge=0, le=1)] = Field(
        default=0.01, description="Allowed rise of the 5xx ratio over the primary's, in absolute points (0.01 = 1 %)."
    )
    max_latency_increase_percent: Annotated[float, Field(ge=0, le=10_000)] = Field(
        default=20, description="Allowed rise of p95 latency over the primary's, in percent of the primary's."
    )
    max_time_to_first_token_increase_percent: Annotated[float, Field(ge=0, le=10_000)] = Field(
        default=20,
        description="LLM engines: allowed rise of p95 time to first token over the primary's, in percent of "
        "the primary's (runtimes with a time-to-first-token histogram only).",
    )
    max_time_per_output_token_increase_percent: Annotated[float, Field(ge=0, le=10_000)] = Field(
        default=20,
        description="LLM engines: allowed rise of p95 time per output token over the primary's, in percent of "
        "the primary's (runtimes with a time-per-output-token histogram only).",
    )
    payloads: PayloadComparison = Field(
        default_factory=PayloadComparison, description="Compare the shadows' answers with the primary's."
    )
