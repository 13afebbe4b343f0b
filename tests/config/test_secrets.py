"""Secret settings (config/secrets.py): refused in plain text, by the offline render at their lines
and by the program as far as the Pulumi CLI tells it which keys are secret."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi.runtime.config
import pytest

from inference_platform.cli.main import main
from inference_platform.config.errors import ConfigError
from inference_platform.config.secrets import secret_paths
from inference_platform.stack import fleet, program
from inference_platform.stack.config import StackConfig
from tests.conftest import SECRET_VALUES, full_config, secured, write_stack_file

# The settings the models mark SECRET, as the stack file's keys.
MARKED = [
    ("platform", "grafana", "adminPassword"),
    ("storage", "s3", "accessKeyId"),
    ("storage", "s3", "secretAccessKey"),
    ("storage", "gcs", "serviceAccountKey"),
    ("storage", "huggingface", "token"),
]


def test_every_storage_key_token_and_password_is_marked_secret() -> None:
    assert sorted(secret_paths(StackConfig)) == sorted(MARKED)
    # The platform stack's facts mask what the marks name, nothing listed by hand beside them.
    assert {key: set(paths) for key, paths in fleet.SECRET_KEYS.items()} == {
        "platform": {("grafana", "adminPassword")},
        "storage": {path[1:] for path in MARKED if path[0] == "storage"},
    }


def _line_of(text: str, key: str, after: str) -> int:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{after}:"))
    return next(i for i, line in enumerate(lines) if i > start and line.strip().startswith(f"{key}:")) + 1


def test_plain_secrets_are_refused_each_at_its_line_with_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_stack_file(tmp_path / "Pulumi.plain.yaml", full_config(decrypted=True))
    out = tmp_path / "out"

    assert main(["render", "--stack", "plain", "--config", str(path), "--out", str(out)]) == 2

    err = capsys.readouterr().err
    assert err.startswith("invalid stack config (5 problems):\n")
    text = path.read_text()
    for keys in MARKED:
        dotted = ".".join(keys)
        line = _line_of(text, keys[-1], keys[-2])
        assert f"{path}:{line}:7: {dotted}: a secret written in plain text" in err, dotted
        assert f"`pulumi config set --secret --path '{dotted}' <value>`" in err
    assert not any(value in err for value in SECRET_VALUES)
    assert not out.exists()


def test_secure_values_render_offline(tmp_path: Path) -> None:
    path = write_stack_file(tmp_path / "Pulumi.sealed.yaml", secured(full_config()))
    assert main(["render", "--stack", "sealed", "--config", str(path), "--out", str(tmp_path / "out")]) == 0


def test_a_plain_value_beside_a_secure_one_is_refused_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stack file says which values are secure: a secure secretAccessKey does not cover a plain accessKeyId."""
    config = secured(full_config())
    config["inference-platform:storage"]["s3"]["accessKeyId"] = "AKIA-PLAIN"
    path = write_stack_file(tmp_path / "Pulumi.half.yaml", config)

    assert main(["render", "--stack", "half", "--config", str(path), "--out", str(tmp_path / "out")]) == 2

    (problem,) = capsys.readouterr().err.splitlines()[1:]
    assert problem.endswith(
        "storage.s3.accessKeyId: a secret written in plain text, for anyone who reads the stack "
        "file: remove it and run `pulumi config set --secret --path 'storage.s3.accessKeyId' <value>`"
    )


@pytest.fixture
def engine_config() -> Iterator[Any]:
    """The config the Pulumi engine hands the program (`pulumi up`): values and the secret keys."""

    def set_config(values: dict[str, Any], secret_keys: list[str]) -> None:
        wire = {key: value if isinstance(value, str) else json.dumps(value) for key, value in values.items()}
        pulumi.runtime.config.set_all_config(wire, secret_keys)

    yield set_config
    pulumi.runtime.config.set_all_config({}, [])


def test_pulumi_up_refuses_a_secret_under_a_key_the_cli_does_not_call_secret(engine_config: Any) -> None:
    values = {
        "inference-platform:domain": "models.example.com",
        "inference-platform:storage": {"huggingface": {"token": "hf_plain"}},
    }
    engine_config(values, [])
    with pytest.raises(ConfigError) as raised:
        program.load_stack_config()
    assert [str(problem) for problem in raised.value.problems] == [
        "storage.huggingface.token: a secret written in plain text, for anyone who reads the stack file: remove it "
        "and run `pulumi config set --secret --path 'storage.huggingface.token' <value>`"
    ]

    engine_config(values, ["inference-platform:storage"])
    assert program.load_stack_config().storage is not None
