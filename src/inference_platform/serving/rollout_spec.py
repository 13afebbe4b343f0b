"""A model's rollout: a candidate version taken step by step to all of the model's traffic, each
step a commit that `python -m infra rollout` writes to the stack file when `analyze`'s verdict on
the candidate allows it (cli/rollout.py; docs/rollouts.md).

What a person writes is the plan (`candidate`, `steps`, `interval`, ...). Where the rollout stands is
`rollout.status`, written only by the command: the stack file is the rollout's whole state, so every
step is a commit (reviewed, but for one that only rolls back under autoMergeRollbacks) and a revert
of one undoes it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator

from inference_platform.config.base import (
    ConfigModel,
    DNS1123Label,
    Duration,
    SchemaRule,
    config_problems,
    duration_nanoseconds,
    ecma_pattern,
)
from inference_platform.config.errors import problems_from_validation

RolloutPhase = Literal["shadow", "canary", "promoted", "rolled-back"]
"""Where a rollout stands: a dark launch (the candidate mirrored), a canary step, or finished."""
FINISHED: Final[frozenset[RolloutPhase]] = frozenset({"promoted", "rolled-back"})
RolloutDecision = Literal["advance", "hold", "rollback", "paused", "resume"]
"""What `infra rollout` decided for a model (docs/rollouts.md, "Decisions")."""
RESTART_HINT: Final = "remove rollout.status to restart the rollout from its first step"
# RFC 3339's date-time (a space for the T, as YAML writes one, too).
_TIMESTAMP = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)


def check_timestamp(value: str) -> str:
    """An RFC 3339 time with its zone (as the command writes it: 2026-12-06T10:15:00Z)."""
    parse_timestamp(value)
    return value


def parse_timestamp(value: str) -> datetime:
    if not _TIMESTAMP.match(value):
        raise ValueError(f"{value!r} is not an RFC 3339 time with its zone (e.g. 2026-12-06T10:15:00Z)")
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError as error:
        raise ValueError(f"{value!r} is not a time: {error}") from None


def first_step(steps: list[int], live: int) -> int | None:
    """Where a rollout starts (1 for steps[0]): the first step at or above the candidate's live
    weight, so that starting never cuts its traffic; None where its weight is above every step."""
    return next((index for index, weight in enumerate(steps, start=1) if weight >= live), None)


def format_timestamp(value: datetime) -> str:
    return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


TIMESTAMP_RULE = SchemaRule(pattern=ecma_pattern(_TIMESTAMP))
Timestamp = Annotated[str, AfterValidator(check_timestamp), TIMESTAMP_RULE]
StepWeight = Annotated[int, Field(ge=1, le=99)]


class ShadowFirst(ConfigModel):
    """A dark launch before the first step: the candidate gets a copy of requests; none of its answers reach a user."""

    mirror_percent: Annotated[float, Field(ge=1, le=100)] = Field(
        description="The share of requests mirrored to the candidate while it is a shadow (1 to 100)."
    )
    duration: Duration | None = Field(
        default=None,
        description="The least time in the shadow phase before the first step (at least analysis.window); "
        "by default the rollout's interval.",
    )


class RolloutStatus(ConfigModel):
    """Where the rollout stands: written by `python -m infra rollout` only (remove it to restart)."""

    phase: RolloutPhase = Field(
        description="shadow (mirrored, before the first step), canary (at a step), promoted or rolled-back (finished)."
    )
    step: Annotated[int, Field(ge=0, le=100)] = Field(
        description="The step the candidate is at, from 1 (steps[0]); 0 in the shadow phase (and after a "
        "rollback from it)."
    )
    primary: DNS1123Label = Field(description="The version with the most live weight when the rollout started.")
    baseline: dict[DNS1123Label, Annotated[int, Field(ge=0, le=100)]] = Field(
        description="The live weights of the versions other than the candidate when the rollout started: "
        "they shrink in proportion at each step, and are restored by a rollback."
    )
    since: Timestamp = Field(description="When the rollout reached its phase and step (RFC 3339).")
    failures: Annotated[int, Field(ge=0, le=1000)] = Field(
        default=0, description="Failing verdicts in a row at this step."
    )
    failed_at: Timestamp | None = Field(
        default=None, description="When the last failing verdict was counted (a run at that time counts it once)."
    )
    decision: RolloutDecision = Field(description="The last decision written.")
    reason: str = Field(default="", description="Why, with the figures.")
    paused: str | None = Field(
        default=None,
        description="Written when the candidate's weights are not what the rollout last wrote (a person moved "
        "them): nothing changes until this key is removed (the rollout then resumes, its step's weights back).",
    )

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    @property
    def since_time(self) -> datetime:
        return parse_timestamp(self.since)

    @property
    def failed_time(self) -> datetime | None:
        return None if self.failed_at is None else parse_timestamp(self.failed_at)


class RolloutSpec(ConfigModel):
    """A candidate version taken step by step to all of the model's traffic by `python -m infra rollout`."""

    candidate: DNS1123Label = Field(description="The version rolled out: one of the model's versions, not its primary.")
    steps: Annotated[list[StepWeight], Field(min_length=1, max_length=20)] = Field(
        description="The candidate's live weight at each step, strictly increasing within 1..99; after the last "
        "it takes 100."
    )
    interval: Duration = Field(description="The least time at a step before the next (at least analysis.window).")
    failure_limit: Annotated[int, Field(ge=1, le=100)] = Field(
        default=1, description="Failing verdicts in a row before the rollback."
    )
    shadow_first: ShadowFirst | None = Field(
        default=None, description="{mirrorPercent, duration}: a dark launch before the first step."
    )
    retire_previous: bool = Field(
        default=False,
        description="After promotion, remove the previous primary from versions (false: keep it, at weight 0).",
    )
    status: RolloutStatus | None = Field(
        default=None,
        description="Where the rollout stands: written by `python -m infra rollout` only, never by hand "
        "(remove it to restart the rollout; remove status.paused to resume one).",
    )

    @field_validator("steps")
    @classmethod
    def _increasing(cls, steps: list[int]) -> list[int]:
        problems = [
            (f"[{index}]", f"{step} is not above the step before it ({steps[index - 1]}): steps strictly increase")
            for index, step in enumerate(steps)
            if index and step <= steps[index - 1]
        ]
        if problems:
            raise config_problems(problems)
        return steps

    @field_validator("status", mode="wrap")
    @classmethod
    def _status_hint(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> RolloutStatus | None:
        """A status that does not parse says how to start again: the command wrote it, so a person
        who edited it (or a merge that mangled it) restarts the rollout by removing it."""
        try:
            status: RolloutStatus | None = handler(value)
        except ValidationError as error:
            raise config_problems(
                [(problem.path, f"{problem.message} ({RESTART_HINT})") for problem in problems_from_validation(error)]
            ) from None
        return status

    @property
    def finished(self) -> bool:
        return self.status is not None and self.status.finished

    @property
    def shadow_duration(self) -> str:
        return (self.shadow_first.duration if self.shadow_first else None) or self.interval

    def problems(self, versions: list[str], primary: str, window: str, live: int = 0) -> list[tuple[str, str]]:
        """What the model's own settings make wrong (paths relative to the model): `versions` its
        versions' names, `primary` the version with the most live weight, `window` analysis.window,
        `live` the candidate's live weight."""
        problems: list[tuple[str, str]] = []
        status = self.status
        finished = status is not None and status.finished
        one_version = len(versions) < 2 and not finished
        if one_version:
            # One mistake: whatever the candidate names, it cannot be a version beside the primary.
            problems.append(("rollout", "the model has one version: a rollout needs a candidate beside the primary"))
        elif self.candidate not in versions:
            problems.append(
                ("rollout.candidate", f"{self.candidate!r} is not one of the model's versions ({', '.join(versions)})")
            )
        started_from = primary if status is None else status.primary
        if self.candidate == started_from and not finished and not one_version:
            problems.append(
                ("rollout.candidate", f"{self.candidate!r} is the model's primary: roll out another version")
            )
        if status is None and self.candidate != primary and first_step(self.steps, live) is None:
            steps = ", ".join(map(str, self.steps))
            problems.append(
                (
                    "rollout.steps",
                    f"{self.candidate} has weight {live} already, above every step ({steps}): a rollout never cuts "
                    f"its candidate's traffic; add a step of at least {live}, or move the traffic with "
                    "`python -m infra promote`",
                )
            )
        window_ns = duration_nanoseconds(window)
        if duration_nanoseconds(self.interval) < window_ns:
            problems.append(
                (
                    "rollout.interval",
                    f"{self.interval} is shorter than analysis.window ({window}): a step would be "
                    "judged on traffic from the step before",
                )
            )
        if self.shadow_first is not None and duration_nanoseconds(self.shadow_duration) < window_ns:
            problems.append(
                ("rollout.shadowFirst.duration", f"{self.shadow_duration} is shorter than analysis.window ({window})")
            )
        if status is not None:
            problems += [
                (f"rollout.status.{path}", f"{message} ({RESTART_HINT})")
                for path, message in self._status_problems(status, versions)
            ]
        return problems

    def _status_problems(self, status: RolloutStatus, versions: list[str]) -> list[tuple[str, str]]:
        problems = []
        if status.phase == "shadow" and self.shadow_first is None:
            problems.append(("phase", "shadow, but the rollout has no shadowFirst"))
        if status.phase == "shadow" and status.step != 0:
            problems.append(("step", f"{status.step} in the shadow phase, which is before step 1 (write 0)"))
        first = 0 if status.phase == "rolled-back" else 1  # rolled back from the shadow phase: 0
        if status.phase != "shadow" and not first <= status.step <= len(self.steps):
            problems.append(("step", f"{status.step} is not one of the steps ({first} to {len(self.steps)})"))
        if status.finished:
            return problems
        if status.primary not in versions:
            problems.append(("primary", f"{status.primary!r} is not one of the model's versions"))
        problems += [
            (f"baseline.{name}", f"{name!r} is not one of the model's versions")
            for name in status.baseline
            if name not in versions
        ]
        if self.candidate in status.baseline:
            problems.append((f"baseline.{self.candidate}", "the candidate has no baseline weight"))
        return problems


class RolloutSettings(ConfigModel):
    """How the stack's rollouts reach the cluster (the rollout workflow, docs/rollouts.md)."""

    auto_merge_rollbacks: bool = Field(
        default=False,
        description="The rollout workflow merges a pull request whose only traffic moves are rollbacks without "
        "waiting for a review (the environment's branch protection still applies); one that also advances, starts "
        "or resumes a model is reviewed. false: a person merges every one.",
    )
