"""The label regex a fleet's query filters on matches exactly the values given, whatever they
hold, as Prometheus' own engine reads it (`promtool test rules`)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from inference_platform.analysis.promql import one_of
from tests.platform.prometheus_harness import PROMTOOL

VALUES = ["model-1", "model-10", "a.b", "c+d", "e|f", "(g)", "[h]", "^i$", 'j"k', "l\\m"]
NEAR = ["model-", "model-100", "axb", "ccd", "e", "f", "g", "h", "i", "model-1|model-10", "l\\\\m"]


def _series(value: str) -> str:
    return 'up{app="' + value.replace("\\", "\\\\").replace('"', '\\"') + '"}'


@pytest.mark.skipif(shutil.which(PROMTOOL) is None, reason=f"{PROMTOOL} is needed (Debian's prometheus package)")
def test_the_regex_matches_exactly_the_values(tmp_path: Path) -> None:
    matched = f'up{{app=~"{one_of(VALUES)}"}}'
    tests = {
        "rule_files": [],
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": _series(v), "values": "1"} for v in VALUES + NEAR],
                "promql_expr_test": [
                    {
                        "expr": f"count({matched})",
                        "eval_time": "0m",
                        "exp_samples": [{"labels": "{}", "value": len(VALUES)}],
                    },
                    {
                        "expr": f'count(up{{app=~"{one_of(NEAR)}"}} unless {matched})',
                        "eval_time": "0m",
                        "exp_samples": [{"labels": "{}", "value": len(NEAR)}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "regex.test.yml").write_text(yaml.safe_dump(tests))
    command = [PROMTOOL, "test", "rules", "regex.test.yml"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_same_values_in_any_order_make_the_same_regex() -> None:
    assert one_of(["b", "a", "b"]) == one_of(["a", "b"]) == "a|b"
