"""What a model says about judging its versions: the thresholds its canaries and shadows are held
to against the primary, read by the alerting rules and `infra analyze` (analysis/comparison.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from inference_platform.config.base import ConfigModel, Duration


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
