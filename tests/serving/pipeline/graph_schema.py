"""KServe's InferenceGraph CRD schema (its `spec`), made strict, for the graphs the program writes.

The router reads `--graph-json` into this very type; the CRD pins it. Structural schemas leave
unknown fields to the API server's pruning, so the check here forbids them instead: a key the
router does not know must fail, not vanish.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT

KSERVE_DIR = Path(os.environ.get("INFRA_TEST_KSERVE_DIR", ROOT.parent / "shared" / "kserve"))
GRAPH_CRD = KSERVE_DIR / "inferencegraphs-crd-v0.20.0.yaml"


def strict(schema: Any) -> Any:
    """The schema with unknown properties refused wherever it lists the known ones."""
    if isinstance(schema, dict):
        out = {key: strict(value) for key, value in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


@functools.cache
def graph_spec_schema() -> dict[str, Any]:
    """The CRD's `spec` schema, or a skip that says why the check cannot run without it."""
    if not GRAPH_CRD.is_file():
        pytest.skip(
            f"no KServe InferenceGraph CRD at {GRAPH_CRD}: the graph check needs "
            "config/crd/full/serving.kserve.io_inferencegraphs.yaml of kserve v0.20.0 (set INFRA_TEST_KSERVE_DIR)"
        )
    crd = yaml.safe_load(GRAPH_CRD.read_text(encoding="utf-8"))
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    result: dict[str, Any] = strict(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return result


def validate_graph(graph: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless the InferenceGraph CRD accepts the graph."""
    jsonschema.validate(graph, graph_spec_schema(), cls=jsonschema.Draft7Validator)
