"""`python -m infra rollout` stepping through hours of traffic, as the scheduled workflow runs it:
a real stack file in a real git repository, committed after each run that changed it, and the real
Prometheus (Debian's build) on loopback, its TSDB backfilled once with promtool from OpenMetrics
text: Istio's request series as the sidecars report them (tests/platform/istio_series.py), vLLM's
token-latency histograms as Prometheus scrapes them from the pods (tests/serving/engine_histograms.py)
and the payload comparator's pairs.

The traffic follows the rollout: the timeline of what each step writes (the steps' times follow
from the intervals) is worked out first, each version's series are generated from the weights and
mirrors declared at each moment (a candidate's requests in proportion to its weight from the time
its step was written), and the runs then check that the command writes exactly that timeline.

- `good` (MLServer): its candidate good throughout: 5, 25, 50, then 100 with v1 retired, a step
  every 15 minutes; the render diff of each of its steps holds only the traffic it moved.
- `bad`: its candidate fails a fifth of its requests from 5 minutes into its second step: rolled
  back at that step, exit 5, with the figures.
- `quiet`: too few requests to judge at 5 %: it holds. A person moves its weights: paused, and it
  stays paused while `paused` is there; removed, the rollout writes its step's weights back.
- `chat` (vLLM): a dark launch mirrored 50 % for 30 minutes, judged on its answers' agreement with
  the primary's and on time to first token (each fails it once, below its failureLimit of 2), then
  steps of 10 and 50.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform.cli.diff import ABSENT, RenderDiff, diff_renders
from inference_platform.cli.exit_codes import ExitCode
from inference_platform.cli.main import main
from inference_platform.serving.runtimes.vllm import VLLMModel
from tests.analysis.test_token_latency import VLLM_TPOT, VLLM_TTFT
from tests.platform.istio_series import (
    DURATIONS_TYPE,
    NAMESPACE,
    PAIRS_TYPE,
    REQUESTS_TYPE,
    pair_samples,
    request_samples,
)
from tests.platform.prometheus_harness import RunningPrometheus, backfilled, prometheus
from tests.ports import free_port
from tests.serving import engine_histograms
from tests.serving.engine_histograms import openmetrics_samples, scraped_labels

pytestmark = pytest.mark.slow

STACK = "dev"
FILE = f"Pulumi.{STACK}.yaml"
STEP = 15  # seconds between samples, as the platform scrapes
MINUTE = 60
HISTORY = 120  # minutes of traffic before the first run
BEFORE = float("-inf")  # what the file declared before the first run
RUNS = range(0, 125, 5)  # the runs, in minutes after the first: every 5 minutes for two hours
# Requests per second to each model, all its live versions together; a shadow gets its mirrored share on top.
RATE = {"good": 10.0, "bad": 10.0, "quiet": 0.5, "chat": 6.0}
ERRORS_FROM, ERROR_SHARE = 20, 0.2  # bad's candidate fails a fifth of its requests from minute 20
DISAGREES = (5, 10)  # chat's shadow disagrees on a tenth of its pairs in these minutes
SLOW_TTFT = (15, 20)  # and is slow to its first token in these
PAIRED = 0.5  # the comparator pairs half of chat's mirrored requests (analysis.payloads.sample)
HAND_EDIT, UNPAUSED = 52.5, 67.5  # a person moves quiet's weights, then removes status.paused

STACK_FILE = """\
# The rollout scenario's stack (tests/cli/test_rollout_scenario.py): every comment survives every write.
config:
  inference-platform:domain: models.example.com
  inference-platform:namespace: service
  inference-platform:models:
    # A candidate that stays good.
    - name: good
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/good/v1
          weight: 100  # the primary
        - name: v2
          modelUri: pvc://models/good/v2
          weight: 0  # idle until the rollout starts
      rollout:
        candidate: v2
        steps: [5, 25, 50]
        interval: 15m  # at least analysis.window (10m)
        retirePrevious: true
    # A candidate that fails a fifth of its requests from 5 minutes into its second step.
    - name: bad
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/bad/v1
          weight: 100
        - name: v2
          modelUri: pvc://models/bad/v2
          weight: 0
      rollout:
        candidate: v2
        steps: [5, 25, 50]
        interval: 15m
    # Too few requests to judge a 5 % canary.
    - name: quiet
      runtime: mlserver
      versions:
        - name: v1
          modelUri: pvc://models/quiet/v1
          weight: 100
        - name: v2
          modelUri: pvc://models/quiet/v2
          weight: 0
      rollout:
        candidate: v2
        steps: [5, 25, 50]
        interval: 15m
    # An LLM: a dark launch judged on its answers and its time to first token, then steps.
    - name: chat
      runtime: vllm
      gpu: exclusive
      versions:
        - name: v1
          modelUri: hf://Qwen/Qwen3-8B
          weight: 100
        - name: v2
          modelUri: hf://Qwen/Qwen3-8B
          mirrorPercent: 10  # a shadow already; the rollout mirrors more to it
      analysis:
        window: 5m
        payloads:
          enabled: true
          sample: 0.5
      rollout:
        candidate: v2
        steps: [10, 50]
        interval: 15m
        failureLimit: 2  # one failing verdict is counted, two in a row roll it back
        shadowFirst:
          mirrorPercent: 50
          duration: 30m
"""
COMMENTS = [line.split("#", 1)[1] for line in STACK_FILE.splitlines() if "#" in line]
# The comment removed with the version it is on (good's v1, retired at promotion).
RETIRED_COMMENT = " the primary"


@dataclass(frozen=True)
class Declared:
    """A model's traffic from a minute on (after the first run): live weights and mirrors."""

    minute: float
    weights: Mapping[str, int]
    mirrors: Mapping[str, float]


# What the stack file declares for each model over time: as written before the first run, then as
# each run (or the person) writes it. The runs are checked against exactly this.
TIMELINE: dict[str, list[Declared]] = {
    "good": [
        Declared(BEFORE, {"v1": 100, "v2": 0}, {}),
        Declared(0, {"v1": 95, "v2": 5}, {}),
        Declared(15, {"v1": 75, "v2": 25}, {}),
        Declared(30, {"v1": 50, "v2": 50}, {}),
        Declared(45, {"v2": 100}, {}),
    ],
    "bad": [
        Declared(BEFORE, {"v1": 100, "v2": 0}, {}),
        Declared(0, {"v1": 95, "v2": 5}, {}),
        Declared(15, {"v1": 75, "v2": 25}, {}),
        Declared(25, {"v1": 100, "v2": 0}, {}),
    ],
    "quiet": [
        Declared(BEFORE, {"v1": 100, "v2": 0}, {}),
        Declared(0, {"v1": 95, "v2": 5}, {}),
        Declared(HAND_EDIT, {"v1": 80, "v2": 20}, {}),
        Declared(70, {"v1": 95, "v2": 5}, {}),
    ],
    "chat": [
        Declared(BEFORE, {"v1": 100}, {"v2": 10}),
        Declared(0, {"v1": 100}, {"v2": 50}),
        Declared(30, {"v1": 90, "v2": 10}, {}),
        Declared(45, {"v1": 50, "v2": 50}, {}),
        Declared(60, {"v1": 0, "v2": 100}, {}),
    ],
}
# Each run's decision per model (a finished rollout is not listed).
STARTED = dict.fromkeys(RATE, "advance")
DECISIONS: dict[int, dict[str, str]] = {
    0: STARTED,
    15: {"good": "advance", "bad": "advance", "quiet": "hold", "chat": "hold"},
    25: {"good": "hold", "bad": "rollback", "quiet": "hold", "chat": "hold"},
    30: {"good": "advance", "quiet": "hold", "chat": "advance"},
    45: {"good": "advance", "quiet": "hold", "chat": "advance"},
    55: {"quiet": "paused", "chat": "hold"},
    60: {"quiet": "paused", "chat": "advance"},
    65: {"quiet": "paused"},
    70: {"quiet": "resume"},
}


def decisions_at(minute: int) -> dict[str, str]:
    if minute in DECISIONS:
        return DECISIONS[minute]
    finished = {"good": 45, "bad": 25, "chat": 60}
    return {m: "hold" for m in RATE if minute < finished.get(m, 1_000)} | (
        {"quiet": "paused"} if HAND_EDIT < minute < UNPAUSED else {}
    )


# The runs that write the file: a step, a rollback, a pause or a resume, and chat's failing verdicts
# counted (minutes 10 and 20) and the passing ones after them that end the run (15, 25).
WRITES = {0, 10, 15, 20, 25, 30, 45, 55, 60, 70}


def declared(model: str, minute: float) -> Declared:
    return [d for d in TIMELINE[model] if d.minute <= minute][-1]


def served(model: str, version: str, minute: float) -> float:
    """Requests a second the version's sidecar counts: its weight's share, and its mirrored share."""
    now = declared(model, minute)
    share = now.weights.get(version, 0) + now.mirrors.get(version, 0)
    return RATE[model] * share / 100


def during(window: tuple[float, float], minute: float) -> bool:
    return window[0] <= minute < window[1]


# --- The series ----------------------------------------------------------------------------------


def openmetrics(t0: int) -> str:
    """Every version's series from HISTORY minutes before the first run to the last run, a sample
    every STEP seconds; what a sample adds is what was served since the one before, at the traffic
    declared when that interval began."""
    times = [t0 + offset for offset in range(-HISTORY * MINUTE, (RUNS[-1] + 5) * MINUTE + 1, STEP)]
    begun = [(t - STEP - t0) / MINUTE for t in times]  # minutes after the first run each interval began
    requests, durations = [REQUESTS_TYPE], [DURATIONS_TYPE]
    for model in RATE:
        for version in ("v1", "v2"):
            failing = [model == "bad" and version == "v2" and m >= ERRORS_FROM for m in begun]
            added = [
                (n * STEP * (1 - ERROR_SHARE * f), n * STEP * ERROR_SHARE * f)
                for n, f in zip((served(model, version, m) for m in begun), failing, strict=True)
            ]
            answered, timed = request_samples(model, version, times, added)
            requests += answered
            durations += timed
    pairs = [PAIRS_TYPE]
    mirrored = [RATE["chat"] * declared("chat", m).mirrors.get("v2", 0) / 100 * PAIRED * STEP for m in begun]
    disagreeing = [0.1 if during(DISAGREES, m) else 0.0 for m in begun]
    pairs += pair_samples(
        "chat", "v2", times, [(n * (1 - d), n * d) for n, d in zip(mirrored, disagreeing, strict=True)]
    )
    return "\n".join([*requests, *durations, *engine_series(times, begun), *pairs, "# EOF"]) + "\n"


def engine_series(times: list[int], begun: list[float]) -> list[str]:
    """chat's versions' time to first token and time per output token, one pod each, as scraped:
    one observation of each a request (mirrored ones included); v2 slow to its first token in SLOW_TTFT."""
    lines = []
    for signal, name in (("ttft", VLLMModel.TTFT_HISTOGRAM), ("tpot", VLLMModel.TPOT_HISTOGRAM)):
        assert name is not None
        histogram = engine_histograms.vllm()[name]
        lines.append(f"# TYPE {name} histogram")
        for version in ("v1", "v2"):
            labels = scraped_labels(histogram, NAMESPACE, "chat", version, f"chat-{version}-7c9f8d4b6-x2v9q")
            added = []
            for m in begun:
                slow = signal == "ttft" and version == "v2" and during(SLOW_TTFT, m)
                shape = (VLLM_TTFT if signal == "ttft" else VLLM_TPOT)["slow" if slow else "fast"]
                n = served("chat", version, m) * STEP
                added.append({value: share / 1000 * n for value, share in shape.items()})
            lines += openmetrics_samples(histogram, labels, added, times)
    return lines


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningPrometheus, int]]:
    """The Prometheus every run asks, and the first run's time (Unix seconds)."""
    directory = tmp_path_factory.mktemp("prometheus")
    t0 = int(time.time()) // 3600 * 3600 - 3 * 3600
    with prometheus(directory, backfilled(directory, openmetrics(t0))) as server:
        yield server, t0


# --- The runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def report(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.out)
        return found


@dataclass(frozen=True)
class Run:
    minute: int
    at: str
    outcome: Outcome
    before: str
    after: str
    commit: str | None
    """The commit of the file this run wrote; None when it wrote nothing."""
    again: Outcome
    """The same run again, at the same time."""
    after_again: str
    clean_after_again: bool


@dataclass
class Scenario:
    repo: Path
    t0: int
    runs: dict[int, Run]
    checks: dict[str, tuple[Outcome, bool]]
    """The runs that must write nothing (Prometheus down, bad input), and whether the file stayed byte-identical."""
    edits: dict[str, str]
    """The person's commits: the hand edit of quiet's weights, and the removal of its paused."""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Rollout", "-c", "user.email=rollout@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def commit(repo: Path, message: str) -> str:
    git(repo, "commit", "-q", "-am", message)
    return git(repo, "rev-parse", "HEAD").strip()


def clean(repo: Path) -> bool:
    return git(repo, "status", "--porcelain") == ""


def rollout(repo: Path, url: str, *extra: str) -> Outcome:
    """The command as the workflow runs it, in this process (its output captured)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["rollout", "--stack", STACK, "--config", str(repo / FILE), "--prometheus", url, *extra])
        except SystemExit as exited:  # argparse refusing an argument
            code = exited.code if isinstance(exited.code, int) else 1
    return Outcome(int(code), out.getvalue(), err.getvalue())


def rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def model_block(text: str, model: str) -> tuple[int, int]:
    """Where a model's item is in the stack file's text (start and end offsets)."""
    found = re.search(rf"^    - name: {model}\n(?:(?!    - name: ).*\n)*", text, re.MULTILINE)
    assert found is not None, model
    return found.start(), found.end()


def hand_edit(text: str) -> str:
    """A person moves quiet's candidate from 5 % to 20 %, editing the file's text."""
    start, end = model_block(text, "quiet")
    block = text[start:end]
    assert (block.count("weight: 95\n"), block.count("weight: 5\n")) == (1, 1), block
    block = block.replace("weight: 95\n", "weight: 80\n").replace("weight: 5\n", "weight: 20\n")
    return text[:start] + block + text[end:]


def unpause(text: str) -> str:
    """A person removes quiet's rollout.status.paused (the key and its value's lines)."""
    start, end = model_block(text, "quiet")
    lines = text[start:end].splitlines(keepends=True)
    (index,) = [i for i, line in enumerate(lines) if line.lstrip().startswith("paused:")]
    indent = len(lines[index]) - len(lines[index].lstrip())
    stop = index + 1
    while stop < len(lines) and len(lines[stop]) - len(lines[stop].lstrip()) > indent:
        stop += 1
    return text[:start] + "".join(lines[:index] + lines[stop:]) + text[end:]


def checks_nothing_written(repo: Path, url: str, at: str) -> dict[str, tuple[Outcome, bool]]:
    """At a time when a run would write (good's and bad's second steps): Prometheus down, --at
    garbage, and a rollout whose candidate is not a version each write nothing."""
    path = repo / FILE
    checks = {}
    for name, given in (
        ("prometheus down", (f"http://127.0.0.1:{free_port()}", "--at", at)),
        ("--at garbage", (url, "--at", "a quarter past ten")),
    ):
        before = path.read_bytes()
        outcome = rollout(repo, *given, "--format", "json")
        checks[name] = (outcome, path.read_bytes() == before and clean(repo))
    text = path.read_text(encoding="utf-8")
    start, end = model_block(text, "good")
    broken = text[:start] + text[start:end].replace("candidate: v2\n", "candidate: v9\n") + text[end:]
    path.write_text(broken, encoding="utf-8")
    outcome = rollout(repo, url, "--at", at, "--format", "json")
    checks["candidate not a version"] = (outcome, path.read_text(encoding="utf-8") == broken)
    git(repo, "checkout", "--", FILE)
    assert clean(repo)
    return checks


@pytest.fixture(scope="module")
def scenario(running: tuple[RunningPrometheus, int], tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """Every run of the two hours, in order, in one git repository; what each did is recorded for
    the tests below (none of them runs the command again)."""
    server, t0 = running
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "main")
    (repo / FILE).write_text(STACK_FILE, encoding="utf-8")
    git(repo, "add", FILE)
    commit(repo, "The stack, its rollouts not started")
    runs: dict[int, Run] = {}
    checks: dict[str, tuple[Outcome, bool]] = {}
    edits: dict[str, str] = {}
    path = repo / FILE
    for minute in RUNS:
        if minute > HAND_EDIT and "hand edit" not in edits:
            path.write_text(hand_edit(path.read_text(encoding="utf-8")), encoding="utf-8")
            edits["hand edit"] = commit(repo, "quiet: v2 to 20 % by hand")
        if minute > UNPAUSED and "unpause" not in edits:
            path.write_text(unpause(path.read_text(encoding="utf-8")), encoding="utf-8")
            edits["unpause"] = commit(repo, "quiet: resume the rollout")
        at = rfc3339(t0 + minute * MINUTE)
        if minute == 15:
            checks = checks_nothing_written(repo, server.url, at)
        before = path.read_text(encoding="utf-8")
        outcome = rollout(repo, server.url, "--at", at, "--format", "json")
        after = path.read_text(encoding="utf-8")
        written = None if clean(repo) else commit(repo, f"rollout at {at}")
        again = rollout(repo, server.url, "--at", at, "--format", "json")
        runs[minute] = Run(
            minute, at, outcome, before, after, written, again, path.read_text(encoding="utf-8"), clean(repo)
        )
        if not clean(repo):  # keep going from what the first run wrote; the test below fails on it
            git(repo, "checkout", "--", FILE)
    return Scenario(repo, t0, runs, checks, edits)


# --- What the runs did ---------------------------------------------------------------------------


def models(run: Run) -> dict[str, dict[str, Any]]:
    return {m["model"]: m for m in run.outcome.report["models"]}


def parsed(text: str) -> dict[str, dict[str, Any]]:
    """The stack file's models by name, as YAML reads them."""
    config = yaml.safe_load(text)["config"]
    return {m["name"]: m for m in config["inference-platform:models"]}


def traffic(model: dict[str, Any]) -> tuple[dict[str, int], dict[str, float]]:
    weights = {v["name"]: v["weight"] for v in model["versions"] if "weight" in v}
    mirrors = {v["name"]: v["mirrorPercent"] for v in model["versions"] if "mirrorPercent" in v}
    return weights, mirrors


def status(run: Run, model: str) -> dict[str, Any]:
    found: dict[str, Any] = parsed(run.after)[model]["rollout"]["status"]
    return found


def test_each_run_decides_as_the_timeline_says(scenario: Scenario) -> None:
    """Exit 0 at every run but the rollback's (5); each model's decision as planned; a finished
    rollout is no longer listed."""
    for minute, run in scenario.runs.items():
        expected_code = ExitCode.CANDIDATE_FAILED if minute == 25 else ExitCode.OK
        assert (run.outcome.code, run.outcome.err) == (expected_code, ""), (minute, run.outcome.err)
        report = run.outcome.report
        assert (report["stack"], report["at"], report["autoMergeRollbacks"]) == (STACK, run.at, False)
        found = {m: d["decision"] for m, d in models(run).items()}
        assert found == decisions_at(minute), (minute, {m: d["reason"] for m, d in models(run).items()})


def test_the_file_declares_the_timeline_after_every_run(scenario: Scenario) -> None:
    """After each run the file's weights and mirrors are the timeline's; the runs that wrote are
    exactly those planned, each one commit; the JSON's `to` is what was written."""
    wrote = {minute for minute, run in scenario.runs.items() if run.commit is not None}
    assert wrote == WRITES
    for minute, run in scenario.runs.items():
        found = parsed(run.after)
        for model in RATE:
            now = declared(model, minute)
            assert traffic(found[model]) == (dict(now.weights), dict(now.mirrors)), (minute, model)
        for model, decision in models(run).items():
            assert (decision["to"]["weights"], decision["to"]["mirrors"]) == traffic(found[model]), (minute, model)
        assert (run.commit is None) == (run.before == run.after), minute


def test_good_goes_5_25_50_then_promoted_with_v1_retired(scenario: Scenario) -> None:
    """A step every interval, never sooner: 5 % at the first run, 25 at minute 15, 50 at 30, then
    100 % at 45 with v1 removed from the file; each step's verdict passes with the figures."""
    runs = scenario.runs
    steps = {minute: models(runs[minute])["good"] for minute in (0, 15, 30, 45)}
    assert [(d["to"]["phase"], d["to"]["step"], d["to"]["weights"]) for d in steps.values()] == [
        ("canary", 1, {"v1": 95, "v2": 5}),
        ("canary", 2, {"v1": 75, "v2": 25}),
        ("canary", 3, {"v1": 50, "v2": 50}),
        ("promoted", 3, {"v2": 100}),
    ]
    assert steps[0]["verdict"] is None  # started from the file alone
    for minute in (15, 30, 45):
        verdict = steps[minute]["verdict"]
        assert (verdict["version"], verdict["role"], verdict["verdict"]) == ("v2", "canary", "pass")
        weight = declared("good", minute - 1).weights["v2"]
        assert verdict["requests"] == pytest.approx(RATE["good"] * weight / 100 * 600, rel=0.02)
    assert steps[45]["reason"].startswith("promoted: v2 takes 100 %, v1 retired (")
    for minute in (5, 10, 20, 25, 35, 40):  # not before the interval
        held = models(runs[minute])["good"]
        assert (held["decision"], held["from"], held["to"]) == ("hold", held["to"], held["from"])
    assert [v["name"] for v in parsed(runs[45].after)["good"]["versions"]] == ["v2"]
    good = status(runs[45], "good")
    assert good | {"reason": ""} == {
        "phase": "promoted",
        "step": 3,
        "primary": "v1",
        "baseline": {"v1": 100},
        "since": runs[45].at,
        "failures": 0,
        "decision": "advance",
        "reason": "",
    }
    assert "good" not in models(runs[50])


def test_bad_is_rolled_back_at_the_step_where_it_turned_bad(scenario: Scenario) -> None:
    """At 25 %, once a window holds its failing requests (minute 25): exit 5, v1 back to 100 %,
    the status' reason giving the error ratios."""
    run = scenario.runs[25]
    bad = models(run)["bad"]
    assert bad["from"] == {"phase": "canary", "step": 2, "weights": {"v1": 75, "v2": 25}, "mirrors": {}}
    assert bad["to"] == {"phase": "rolled-back", "step": 2, "weights": {"v1": 100, "v2": 0}, "mirrors": {}}
    verdict = bad["verdict"]
    # 5 of the window's 10 minutes fail a fifth of the candidate's requests: 10 %.
    assert (verdict["verdict"], verdict["errorRatio"]) == ("fail", pytest.approx(0.10, abs=0.005))
    written = status(run, "bad")
    assert (written["phase"], written["step"], written["decision"], written["failures"]) == (
        "rolled-back",
        2,
        "rollback",
        1,
    )
    assert written["reason"] == bad["reason"]
    assert written["reason"].startswith("rolled back after 1 failing verdict in a row: error ratio 10.00% is 10.00 ")
    assert "errors 10.00% (primary 0.00%)" in written["reason"]
    held = models(scenario.runs[20])["bad"]  # its step's first window not complete: not judged yet
    assert (held["decision"], held["verdict"]) == ("hold", None)
    assert held["reason"].startswith(f"the step's first window (10m) ends at {scenario.runs[25].at}")
    assert all("bad" not in models(run) for minute, run in scenario.runs.items() if minute > 25)


def test_quiet_holds_on_too_few_requests_and_writes_nothing(scenario: Scenario) -> None:
    """Its start is its only write until the person's edit: every run holds, saying why."""
    for minute in range(5, 55, 5):
        run = scenario.runs[minute]
        quiet = models(run)["quiet"]
        assert quiet["decision"] == "hold"
        assert parsed(run.after)["quiet"] == parsed(scenario.runs[0].after)["quiet"], minute
        if minute >= 10:  # its first window complete: judged
            assert quiet["verdict"]["verdict"] == "insufficient-data"
            assert quiet["reason"] == "insufficient-data: it served 15 requests, fewer than minRequests (100 requests)"


def test_a_hand_edit_pauses_until_paused_is_removed(scenario: Scenario) -> None:
    """The person's 20 % is kept; the next run writes status.paused (and nothing else), the runs
    after it write nothing while it is there; once removed, the step's 5 % is written back and its
    clock starts again."""
    runs = scenario.runs
    paused = models(runs[55])["quiet"]
    assert (
        paused["from"]
        == paused["to"]
        == {
            "phase": "canary",
            "step": 1,
            "weights": {"v1": 80, "v2": 20},
            "mirrors": {},
        }
    )
    written = status(runs[55], "quiet")
    assert written["decision"] == "paused"
    assert written["paused"].startswith("v2 has weight 20 in the file, and the rollout wrote weight 5")
    edited = parsed(git(scenario.repo, "show", f"{scenario.edits['hand edit']}:{FILE}"))["quiet"]
    after = parsed(runs[55].after)["quiet"]
    assert after["versions"] == edited["versions"]
    assert after["rollout"] == edited["rollout"] | {
        "status": edited["rollout"]["status"]
        | {"decision": "paused", "reason": paused["reason"], "paused": written["paused"]}
    }
    assert runs[65].commit is None
    for minute in (60, 65):  # chat's promotion writes at 60, not quiet
        assert models(runs[minute])["quiet"]["decision"] == "paused"
        assert parsed(runs[minute].after)["quiet"] == after, minute
    resumed = models(runs[70])["quiet"]
    assert resumed["to"]["weights"] == {"v1": 95, "v2": 5}
    resumed_status = status(runs[70], "quiet")
    assert (resumed_status["decision"], resumed_status["since"], "paused" in resumed_status) == (
        "resume",
        runs[70].at,
        False,
    )
    assert models(runs[75])["quiet"]["decision"] == "hold"


def test_chat_leaves_its_shadow_phase_only_after_agreement_and_ttft_pass_for_30_minutes(scenario: Scenario) -> None:
    """Started as a shadow mirrored 50 %; judged as a shadow on its answers (disagreeing at minute
    10: a failing verdict, counted) and its time to first token (slow at minute 20: counted), each
    failure ended by the next pass; the first step at minute 30, when the shadow phase has lasted
    its duration; then 10 %, 50 %, and 100 % with v1 kept at weight 0."""
    runs = scenario.runs
    start = models(runs[0])["chat"]
    assert (start["from"]["mirrors"], start["to"]) == (
        {"v2": 10},
        {"phase": "shadow", "step": 0, "weights": {"v1": 100}, "mirrors": {"v2": 50}},
    )
    judged = {minute: models(runs[minute])["chat"] for minute in range(5, 35, 5)}
    verdicts = {minute: d["verdict"]["verdict"] for minute, d in judged.items()}
    assert verdicts == {5: "pass", 10: "fail", 15: "pass", 20: "fail", 25: "pass", 30: "pass"}
    for d in judged.values():
        assert d["verdict"]["role"] == "shadow"
        assert d["verdict"]["timeToFirstToken"]["requests"] == pytest.approx(RATE["chat"] * 0.5 * 300, rel=0.02)
        assert d["verdict"]["pairs"] == pytest.approx(RATE["chat"] * 0.5 * PAIRED * 300, rel=0.02)
    assert judged[10]["verdict"]["agreement"] == pytest.approx(0.9, abs=1e-3)
    assert judged[10]["reason"].startswith("failing verdict 1 of 2 in a row: agrees with v1 on 90.0% of 450 ")
    assert judged[20]["verdict"]["timeToFirstToken"]["p95Ms"] == 375
    assert judged[20]["reason"].startswith(
        "failing verdict 1 of 2 in a row: p95 time to first token 375 ms is 50.0 % above the primary's 250 ms"
    )
    failures = {minute: status(runs[minute], "chat")["failures"] for minute in range(5, 30, 5)}
    assert failures == {5: 0, 10: 1, 15: 0, 20: 1, 25: 0}
    assert judged[25]["reason"].endswith("at this step for 25m of 30m; a passing verdict ends the run of failures")
    first = judged[30]
    assert (first["decision"], first["to"]["phase"], first["to"]["step"]) == ("advance", "canary", 1)
    assert first["to"]["weights"] == {"v1": 90, "v2": 10}
    assert first["to"]["mirrors"] == {}
    assert first["verdict"]["agreement"] == 1.0
    assert first["verdict"]["timeToFirstToken"]["p95Ms"] == 250
    assert [models(runs[m])["chat"]["to"]["weights"] for m in (45, 60)] == [{"v1": 50, "v2": 50}, {"v1": 0, "v2": 100}]
    assert status(runs[60], "chat")["phase"] == "promoted"


def test_a_second_run_at_the_same_time_changes_nothing(scenario: Scenario) -> None:
    """After each run and its commit, the same run again: the file byte-identical, git clean, the
    same decisions (the failures counted once)."""
    for minute, run in scenario.runs.items():
        assert run.after_again == run.after, minute
        assert run.clean_after_again, minute
        assert run.again.code in (ExitCode.OK, ExitCode.CANDIDATE_FAILED), (minute, run.again.err)
        assert {m["model"] for m in run.again.report["models"]} <= {m["model"] for m in run.outcome.report["models"]}


def test_prometheus_down_and_bad_input_write_nothing(scenario: Scenario) -> None:
    checks = scenario.checks
    down, untouched = checks["prometheus down"]
    assert (down.code, untouched, down.out) == (ExitCode.PROMETHEUS_UNAVAILABLE, True, "")
    assert down.err.startswith("rollout: cannot reach Prometheus at http://127.0.0.1:")
    assert down.err.endswith("; nothing was written\n")
    garbage, untouched = checks["--at garbage"]
    assert (garbage.code, untouched, garbage.out) == (ExitCode.CONFIG_ERROR, True, "")
    assert garbage.err.startswith("rollout: --at: ")
    wrong, untouched = checks["candidate not a version"]
    assert (wrong.code, untouched, wrong.out) == (ExitCode.CONFIG_ERROR, True, "")
    line = STACK_FILE.splitlines().index("        candidate: v2") + 1
    assert f"{scenario.repo / FILE}:{line}:9: models[0] (good).rollout.candidate: 'v9' is not one of" in wrong.err
    assert "Traceback" not in down.err + garbage.err + wrong.err


def comment_places(text: str) -> dict[str, tuple[str, str]]:
    """Where each comment is: a comment line, by the line it stands above; one at the end of a line,
    by its line's indentation and the model whose item holds it."""
    lines = text.splitlines()
    places = {}
    for index, line in enumerate(lines):
        code, hash_mark, comment = line.partition("#")
        if not hash_mark:
            continue
        if code.strip():
            owner = [m for m in RATE if model_block(text, m)[0] <= text.index(line) < model_block(text, m)[1]]
            places[comment] = ("end of a line", f"{len(code) - len(code.lstrip())} {owner}")
        else:
            following = next((n for n in lines[index + 1 :] if not n.lstrip().startswith("#")), "")
            places[comment] = ("above", following)
    return places


def test_every_comment_stays_where_it_was_through_every_write(scenario: Scenario) -> None:
    """Each comment of the file is in it after every run, in its place: a model's comment above its
    item, a version's on its version's line (the retired v1's stays where v1 was, above v2)."""
    original = comment_places(STACK_FILE)
    assert len(original) == len(COMMENTS) == 10
    for minute, run in scenario.runs.items():
        expected = dict(original)
        if minute >= 45:
            expected[RETIRED_COMMENT] = ("above", "        - name: v2")
        assert comment_places(run.after) == expected, minute
        assert run.after.startswith(STACK_FILE.splitlines()[0] + "\n")


# --- The render diff of good's steps ---------------------------------------------------------------


def render(repo: Path, commit: str, out: Path) -> Path:
    """`python -m infra render` of the stack file as it was at a commit."""
    source = out.with_suffix(".yaml")
    source.write_text(git(repo, "show", f"{commit}:{FILE}"), encoding="utf-8")
    assert main(["render", "--stack", STACK, "--config", str(source), "--out", str(out)]) == 0
    return out


OWNER = re.compile(r" service/(good|bad|quiet|chat)(?:-| )")
ROUTE_WEIGHT = re.compile(r"^spec\.http\[(by-host|by-path|in-mesh)\]\.route\[[01]\]\.weight$")
GOOD_RULES = "values.serverFiles.alerting_rules.yml.groups[inference-service-good]"


def owner(label: str) -> str | None:
    found = OWNER.search(label)
    return None if found is None else found.group(1)


def moved(minute: int) -> set[str]:
    """The models whose traffic the run at this minute wrote."""
    return {m for m in RATE if declared(m, minute) != declared(m, minute - 1)}


Change = tuple[str, Any, Any]


def good_changes(diff: RenderDiff) -> tuple[dict[str, list[Change]], set[str], set[str], dict[str, Change]]:
    """good's objects changed (label -> (path, before, after)), added and removed; its alerting and
    recording rules changed (the rule's name or the group -> (path, before, after))."""
    changed = {
        label: [(c.path, c.before, c.after) for c in changes]
        for label, changes in diff.objects.changed.items()
        if owner(label) == "good"
    }
    added = {label for label in diff.objects.added if owner(label) == "good"}
    removed = {label for label in diff.objects.removed if owner(label) == "good"}
    rules = {
        rule_name(c.path): (c.path, c.before, c.after)
        for changes in diff.charts.changed.values()
        for c in changes
        if c.path.startswith(GOOD_RULES)
    }
    return changed, added, removed, rules


def rule_name(path: str) -> str:
    """`InferenceRolloutStarvedOfData` of `...groups[inference-service-good].rules[InferenceRolloutStarvedOfData].expr`;
    the group's own path for the group."""
    found = re.match(re.escape(GOOD_RULES) + r"\.rules\[([^]]+)\]", path)
    return path if found is None else found.group(1)


# The rules that judge a canary of good's and record its rollout: added at its first step.
CANARY_RULES = {
    "InferenceVersionErrorRatioAbovePrimary",
    "InferenceVersionGetsNoTraffic role=canary",
    "InferenceVersionSlowerThanPrimary",
    "InferenceRolloutStarvedOfData",
    "inference:rollout_candidate_weight:declared",
    "inference:rollout_step:declared",
}
STEP_RULE, WEIGHT_RULE, STARVED = (
    "inference:rollout_step:declared",
    "inference:rollout_candidate_weight:declared",
    "InferenceRolloutStarvedOfData",
)


def test_the_render_diff_of_each_of_goods_steps_shows_only_the_weights(
    scenario: Scenario, tmp_path: Path, capsys: Any
) -> None:
    """Each commit of a step of good's, rendered before and after: good's routes' weights move as
    the step says, and of good's nothing else changes but the step and weight its rules record for
    the cluster's tools (and the starved-of-data alert that names them); at the start its rules
    begin to judge v2, at the promotion v1's objects, route and rules go. Whatever else changed
    belongs to a model the same run moved."""
    runs = scenario.runs
    minutes = (0, 15, 30, 45)
    parents = {m: git(scenario.repo, "rev-parse", f"{runs[m].commit}~1").strip() for m in minutes}
    for minute in minutes:
        old = render(scenario.repo, parents[minute], tmp_path / f"before-{minute}")
        new = render(scenario.repo, runs[minute].commit or "", tmp_path / f"after-{minute}")
        capsys.readouterr()
        diff = diff_renders(old, new)
        owners = {owner(label) for label in [*diff.objects.added, *diff.objects.removed, *diff.objects.changed]}
        assert owners - {None} == moved(minute), minute
        before, after = declared("good", minute - 1).weights, declared("good", minute).weights
        weights = {(c.path, c.before, c.after) for c in diff.outputs if c.path.startswith("models.good.")}
        assert weights == {(f"models.good.weights.{v}", before[v], after.get(v, ABSENT)) for v in before}, minute
        changed, added, removed, rules = good_changes(diff)
        routes = {
            "VirtualService service/good (networking.istio.io/v1)",
            "VirtualService service/good-mesh (networking.istio.io/v1)",
        }
        assert added == set(), minute
        if minute < 45:
            assert (set(changed), removed) == (routes, set()), minute
            for label, fields in changed.items():
                assert {(ROUTE_WEIGHT.match(path) is not None, b, a) for path, b, a in fields} == {
                    (True, before["v1"], after["v1"]),
                    (True, before["v2"], after["v2"]),
                }, (minute, label)
            step = [0, 15, 30].index(minute) + 1
            if minute == 0:  # v2 judged as a canary from its first step, its step recorded
                assert set(rules) == CANARY_RULES
                assert all(b is ABSENT for _, b, _ in rules.values())
                assert (rules[STEP_RULE][2]["expr"], rules[WEIGHT_RULE][2]["expr"]) == ("vector(1)", "vector(5)")
            else:  # the step and weight the rules record, and the one alert that names them
                assert rules[STEP_RULE][1:] == (f"vector({step - 1})", f"vector({step})")
                assert rules[WEIGHT_RULE][1:] == (f"vector({before['v2']})", f"vector({after['v2']})")
                path, said, says = rules[STARVED]
                assert path.endswith(".annotations.description")
                assert said.replace(f"step {step - 1} ({before['v2']} %)", f"step {step} ({after['v2']} %)") == says
                assert set(rules) == {STEP_RULE, WEIGHT_RULE, STARVED}
        else:
            assert removed == {
                "ConfigMap service/good-v1 (v1)",
                "Deployment service/good-v1 (apps/v1)",
                "Service service/good-v1 (v1)",
            }
            assert set(changed) == routes | {"DestinationRule service/good (networking.istio.io/v1)"}
            assert changed["DestinationRule service/good (networking.istio.io/v1)"] == [
                ("spec.subsets[v1]", {"labels": {"version": "v1"}, "name": "v1"}, ABSENT)
            ]
            mesh = changed["VirtualService service/good-mesh (networking.istio.io/v1)"]
            assert [(path, b, a) for path, b, a in mesh if a is not ABSENT] == [
                ("spec.http[in-mesh].route[0].destination.subset", "v1", "v2"),
                ("spec.http[in-mesh].route[0].weight", 50, 100),
            ]
            assert [path for path, _, a in mesh if a is ABSENT] == ["spec.http[in-mesh].route[1]"]
            assert list(rules) == [GOOD_RULES]  # one version left: nothing to compare, no rollout to record
            assert rules[GOOD_RULES][2] is ABSENT
        if minute == 15:
            assert main(["diff", str(old), str(new)]) == 0
            report = capsys.readouterr().out
            assert "| `spec.http[by-path].route[1].weight` | `5` | `25` |" in report
            assert "| `models.good.weights.v2` | `5` | `25` |" in report
