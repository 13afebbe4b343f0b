"""A verdict's reasons name their units: an error ratio's increase is in percentage points (a
difference of two percentages), latency in ms and %, thresholds in requests and pairs."""

from __future__ import annotations

from inference_platform.analysis.verdicts import Agreement, Stats, judge, judge_agreement
from inference_platform.serving.analysis_spec import AnalysisSpec, PayloadComparison


def stats(requests: int, error_ratio: float = 0.0, p95_ms: float = 90.0) -> Stats:
    return Stats(requests=requests, error_ratio=error_ratio, p50_ms=25.0, p95_ms=p95_ms, p99_ms=98.0)


def test_an_error_ratio_increase_is_in_percentage_points() -> None:
    verdict, reasons = judge(stats(600, error_ratio=0.05), stats(5400), AnalysisSpec(), "v1")
    assert verdict == "fail"
    assert reasons == [
        "error ratio 5.00% is 5.00 percentage points above the primary's 0.00% (allowed 1 percentage point)"
    ]
    spec = AnalysisSpec(max_error_ratio_increase=0.02)
    assert judge(stats(600, error_ratio=0.05), stats(5400), spec, "v1")[1][0].endswith("(allowed 2 percentage points)")


def test_latency_and_thresholds_name_their_units() -> None:
    _, [slower] = judge(stats(600, p95_ms=180.0), stats(5400), AnalysisSpec(), "v1")
    assert slower == "p95 latency 180 ms is 100.0 % above the primary's 90 ms (allowed 20 %)"
    verdict, [few] = judge(stats(30), stats(5400), AnalysisSpec(), "v1")
    assert (verdict, few) == ("insufficient-data", "it served 30 requests, fewer than minRequests (100 requests)")
    verdict, [unpaired] = judge_agreement(Agreement(pairs=3, ratio=1.0), PayloadComparison(), "v1")
    assert unpaired.endswith(f"fewer than payloads.minPairs ({PayloadComparison().min_pairs} pairs)")
