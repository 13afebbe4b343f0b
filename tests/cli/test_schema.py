"""`python -m infra schema`: the JSON Schema editors use, kept current in the repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from inference_platform.cli.schema import SCHEMA_FILE, stack_file_schema
from inference_platform.cli.stack_file import read_stack_config
from inference_platform.config.errors import ConfigError
from inference_platform.config.secrets import secret_paths
from inference_platform.stack.config import PROJECT, StackConfig
from tests.conftest import EXAMPLE_STACKS, ROOT, base_config, full_config, keda_config, write_stack_file


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
    """Every stack file the render takes: the project's, the examples', the all-features and KEDA stacks."""
    stack_files = sorted(ROOT.glob("Pulumi.*.yaml")) + sorted(EXAMPLE_STACKS.values())
    assert len(stack_files) > 2
    for path in stack_files:
        validator().validate(yaml.safe_load(path.read_text()))
    for config in (full_config(), keda_config()):
        validator().validate({"config": config})


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
        "inference-platform:storage": {
            "s3": {"accessKeyId": {"secure": "v1:id"}, "secretAccessKey": {"secure": "v1:abc"}}
        }
    }
    validator().validate({"config": config})
    config["inference-platform:domain"] = {"secure": "v1:abc"}
    assert list(validator().iter_errors({"config": config}))


@pytest.mark.parametrize("path", secret_paths(StackConfig), ids=".".join)
def test_secret_settings_take_only_encrypted_values(path: tuple[str, ...], tmp_path: Path) -> None:
    """Where the render refuses a secret in plain text (config/secrets.py), so does the schema: a
    stack file holds `{secure: ...}` there, never the value itself."""
    config = full_config()
    holder = config.setdefault(f"{PROJECT}:{path[0]}", {})
    for key in path[1:-1]:
        holder = holder.setdefault(key, {})
    holder[path[-1]] = "plain-text"
    assert [e.message for e in validator().iter_errors({"config": config})]
    with pytest.raises(ConfigError, match="a secret written in plain text"):
        read_stack_config(write_stack_file(tmp_path / "Pulumi.test.yaml", config))


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key not in ("properties", "$defs", "patternProperties"):
                yield from _patterns(value)
            else:
                yield from (p for item in value.values() for p in _patterns(item))
                if key == "patternProperties":
                    yield from value
    elif isinstance(node, list):
        for item in node:
            yield from _patterns(item)


def test_patterns_mean_the_same_to_editors() -> None:
    """Editors run the schema's patterns as ECMA-262 regexes (JavaScript's, with the u flag, as VS
    Code's YAML extension does); the program's validators and this test's jsonschema as Python's.
    Each pattern compiles in node and matches exactly the same strings of the corpus of mistakes
    and controls (tests/cli/test_schema_corpus.py) as Python's re does."""
    from tests.cli.test_schema_corpus import CORPUS_STRINGS

    patterns = sorted(set(_patterns(stack_file_schema())))
    samples = sorted(CORPUS_STRINGS)
    script = (
        "const {patterns, samples} = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(patterns.map(p => samples.map(s => new RegExp(p, 'u').test(s)))));"
    )
    done = subprocess.run(
        ["node", "-e", script],
        input=json.dumps({"patterns": patterns, "samples": samples}),
        capture_output=True,
        text=True,
        check=True,
    )
    in_node = json.loads(done.stdout)
    differences = [
        (pattern, sample)
        for pattern, matches in zip(patterns, in_node, strict=True)
        for sample, matched in zip(samples, matches, strict=True)
        if matched != bool(re.search(pattern, sample))
    ]
    assert len(patterns) > 10
    assert differences == []
