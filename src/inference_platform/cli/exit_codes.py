"""The exit status of every `python -m infra` command, one table (docs/workflow.md, "Exit codes").

Each number means one thing whichever command returns it: 1 is only ever the program (or this
tool) failing, never a verdict, so a script can tell "a candidate failed" (5) from "analyze
could not run" (1)."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    """Done: rendered, diffed, promoted, printed; for `analyze`, every candidate passes (or there is none)."""
    PROGRAM_ERROR = 1
    """The Pulumi program (or this tool) failed: a bug to report, not a mistake in the input."""
    CONFIG_ERROR = 2
    """Bad usage or a bad stack file, reported at its line; nothing was written (argparse's own code too)."""
    INSUFFICIENT_DATA = 3
    """`analyze`: no candidate fails, but some served too few requests (or slept at zero replicas);
    or `--model` names a model with nothing to compare (no canary, no shadow)."""
    PROMETHEUS_UNAVAILABLE = 4
    """`analyze`, `rollout`: Prometheus cannot be reached, or answered something that is not a query
    result (`rollout` wrote nothing)."""
    CANDIDATE_FAILED = 5
    """`analyze`: at least one canary or shadow fails its thresholds; `rollout`: a rollback was written."""
    REHEARSAL_FAILED = 6
    """`rehearse`: a step failed (preview, up, the second up changed something, destroy left objects
    behind, the API server refused a pod): the report names each resource with the engine's words."""
    PODS_PENDING = 7
    """`rehearse`: every step passed, and the scheduler left pods Pending, as the capacity plan says
    it must on the rehearsed nodes (fewer than declared, as when a node is lost)."""
    PLACEMENT_DISAGREES = 8
    """`rehearse`: the scheduler and `infra capacity` disagree: a pod the plan fits stayed Pending,
    or the scheduler placed what the plan says does not fit."""
    INTERRUPTED = 130
    """`rehearse` was interrupted (Ctrl-C, SIGTERM): 128 + SIGINT; it stopped everything it started."""
    CLOSED_PIPE = 141
    """Whoever read the output stopped reading (`| head`): 128 + SIGPIPE, as a shell reports it."""
