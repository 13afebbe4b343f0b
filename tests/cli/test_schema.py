"""`python -m infra schema`: the JSON Schema editors use, kept current in the repository."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import jsonschema
import pytest
import yaml

from inference_platform.cli.schema import SCHEMA_FILE, stack_file_schema
from tests.conftest import ROOT, base_config


def validator() -> jsonschema.Draft202012Validator:
    schema = stack_file_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_committed_schema_is_current() -> None:
    committed = json.loads((ROOT / SCHEMA_FILE).read_text())
    assert committed == stack_file_schema(), "run `make schema` to regenerate infra/stack-config.schema.json"


def test_schema_command_prints_the_schema() -> None:
    done = subprocess.run([sys.executable, "-m", "infra", "schema"], cwd=ROOT, capture_output=True, check=True)
    assert json.loads(done.stdout) == stack_file_schema()


def test_stack_files_in_the_repository_match_the_schema() -> None:
    stack_files = sorted(ROOT.glob("Pulumi.*.yaml"))
    assert stack_files
    for path in stack_files:
        validator().validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c.update({"inference-platform:modles": []}),
        lambda c: c["inference-platform:models"][0].update(wieght=3),
        lambda c: c["inference-platform:models"][0]["versions"][0].update(weight="ninety"),
        lambda c: c["inference-platform:models"][0].update(runtime="tensorflow"),
        lambda c: c.pop("inference-platform:domain"),
    ],
    ids=["unknown-key", "unknown-model-key", "weight-type", "unknown-runtime", "missing-domain"],
)
def test_schema_flags_what_editors_should_flag(mutate: Any) -> None:
    config = base_config()
    mutate(config)
    assert list(validator().iter_errors({"config": config}))


def test_other_namespaces_keys_are_allowed() -> None:
    config = base_config() | {"kubernetes:context": "kind-dev"}
    validator().validate({"config": config})


def test_credentials_may_be_encrypted_values() -> None:
    config = base_config() | {
        "inference-platform:storage": {"s3": {"accessKeyId": "id", "secretAccessKey": {"secure": "v1:abc"}}}
    }
    validator().validate({"config": config})
    config["inference-platform:domain"] = {"secure": "v1:abc"}
    assert list(validator().iter_errors({"config": config}))
