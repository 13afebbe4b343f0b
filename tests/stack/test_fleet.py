"""An environment past one stack: a platform stack and its shards (stack/fleet.py), through the
real program under the SDK's mocks, the offline render and the tools.

The all-features stack, split into a platform stack and three shards (models dealt round robin,
the pipelines in the last), renders to the same Kubernetes objects, with the same names and
contents, as the one stack does; only the alerts and dashboards move, into ConfigMaps each shard
writes for the platform's Prometheus and Grafana to gather, and together they are the one stack's.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_platform import __version__
from inference_platform.cli import platform_record
from inference_platform.cli.main import main
from inference_platform.cli.names import ALLOW_STALE_PLATFORM
from inference_platform.cli.render_files import MANIFESTS, OUTPUTS, read_chart_objects, read_render
from inference_platform.config import limits
from inference_platform.platform import grafana, prometheus
from inference_platform.stack import fleet
from tests.conftest import full_config, secured, write_stack_file

PREFIX = "inference-platform:"
PLATFORM = "env"
SHARDS = ("env-a", "env-b", "env-c")
ONE = "one"
Key = tuple[str, str, str]


def split(config: dict[str, Any], shards: tuple[str, ...] = SHARDS) -> dict[str, dict[str, Any]]:
    """A one-stack config as a platform stack and shards: models dealt round robin, pipelines in the last."""
    platform = {k: v for k, v in config.items() if k not in (f"{PREFIX}models", f"{PREFIX}pipelines")}
    platform[f"{PREFIX}{fleet.SHARDS_KEY}"] = list(shards)
    files = {PLATFORM: platform}
    for index, shard in enumerate(shards):
        models = config[f"{PREFIX}models"][index :: len(shards)]
        files[shard] = {
            f"{PREFIX}{fleet.PLATFORM_STACK_KEY}": f"acme/inference-platform/{PLATFORM}",
            f"{PREFIX}models": models,
        }
    files[shards[-1]][f"{PREFIX}pipelines"] = config.get(f"{PREFIX}pipelines", [])
    return files


def joined(config: dict[str, Any], shards: tuple[str, ...] = SHARDS) -> dict[str, Any]:
    """The same environment as one stack: its models in the order the platform stack reads them."""
    files = split(config, shards)
    one = {k: v for k, v in files[PLATFORM].items() if k != f"{PREFIX}{fleet.SHARDS_KEY}"}
    one[f"{PREFIX}models"] = [m for shard in shards for m in files[shard][f"{PREFIX}models"]]
    one[f"{PREFIX}pipelines"] = [p for shard in shards for p in files[shard].get(f"{PREFIX}pipelines", [])]
    return one


def write(directory: Path, files: dict[str, dict[str, Any]]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return {stack: write_stack_file(directory / f"Pulumi.{stack}.yaml", config) for stack, config in files.items()}


def render(stack: str, path: Path, out: Path, *extra: str) -> int:
    return main(["render", "--stack", stack, "--config", str(path), "--out", str(out / stack), "--no-charts", *extra])


def render_environment(path: Path, out: Path) -> int:
    """The platform stack and its shards (--shards), each stack's render inside `out` (out/<stack>)."""
    return main(["render", "--stack", PLATFORM, "--config", str(path), "--out", str(out), "--shards", "--no-charts"])


def objects(directory: Path) -> dict[Key, dict[str, Any]]:
    manifests, _, _ = read_render(directory)
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in manifests}


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The split environment rendered whole (the platform stack, then its shards beside it), and the one stack."""
    root = tmp_path_factory.mktemp("fleet")
    paths = write(root / "stacks", split(secured(full_config())))
    assert render_environment(paths[PLATFORM], root / "out") == 0
    one = write_stack_file(root / "stacks" / f"Pulumi.{ONE}.yaml", joined(secured(full_config())))
    assert render(ONE, one, root / "out") == 0
    return root / "out"


def environment_objects(renders: Path) -> dict[Key, dict[str, Any]]:
    found: dict[Key, dict[str, Any]] = {}
    for stack in (PLATFORM, *SHARDS):
        for key, obj in objects(renders / stack).items():
            assert key not in found, f"{key} is registered by two stacks"
            found[key] = obj
    return found


def moved(key: Key) -> bool:
    """The shards' ConfigMaps of alerts and dashboards, which a one-stack environment keeps in charts."""
    return key[0] == "ConfigMap" and key[2].startswith(("inference-rules-", "inference-dashboards-"))


def test_the_environment_registers_the_one_stacks_objects(renders: Path) -> None:
    one, environment = objects(renders / ONE), environment_objects(renders)
    assert set(one) == {key for key in environment if not moved(key)}
    differ = sorted(key for key in one if one[key] != environment[key])
    # Grafana's sidecar gathers the shards' dashboards through the API: its policy lets it out there.
    assert differ == [("NetworkPolicy", "monitoring", "grafana")]
    egress = environment[differ[0]]["spec"]["egress"]
    assert [rule for rule in egress if rule not in one[differ[0]]["spec"]["egress"]]


def test_the_shards_alerts_and_dashboards_are_the_one_stacks(renders: Path) -> None:
    environment = environment_objects(renders)
    charts = {chart["name"]: chart for chart in read_render(renders / ONE)[1]}
    one_alerts = charts["prometheus"]["values"]["serverFiles"]["alerting_rules.yml"]["groups"]
    shard_alerts = [
        group
        for key, obj in sorted(environment.items())
        if moved(key) and key[2].startswith("inference-rules-")
        for group in yaml.safe_load(obj["data"][fleet.ALERTING_RULES_FILE])["groups"]
    ]
    assert one_alerts  # the all-features stack compares several models' versions

    def named(groups: list[dict[str, Any]], stack: str) -> str:
        # An alert's promote hint names the stack whose file holds the model.
        return json.dumps(sorted(groups, key=lambda g: g["name"]), sort_keys=True).replace(
            f"--stack {stack} ", "--stack STACK "
        )

    shard_text = named(shard_alerts, "X")
    for shard in SHARDS:
        shard_text = shard_text.replace(f"--stack {shard} ", "--stack STACK ")
    assert named(one_alerts, ONE) == shard_text
    one_dashboards = {
        f"{name}.json": body["json"]
        for name, body in charts["grafana"]["values"]["dashboards"][grafana.PROVIDER].items()
    }
    shard_dashboards = {
        file: text
        for key, obj in environment.items()
        if moved(key) and key[2].startswith("inference-dashboards-")
        for file, text in obj["data"].items()
    }
    assert shard_dashboards == one_dashboards


def test_the_platforms_prometheus_and_grafana_gather_what_shards_write(renders: Path) -> None:
    charts = {chart["name"]: chart for chart in read_render(renders / PLATFORM)[1]}
    values = charts["prometheus"]["values"]
    assert values["serverFiles"]["alerting_rules.yml"] == {"groups": []}
    (sidecar,) = values["server"]["sidecarContainers"].values()
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env["LABEL"] == prometheus.RULES_LABEL
    assert f"{prometheus.RULES_DIRECTORY}/*.yml" in values["serverFiles"]["prometheus.yml"]["rule_files"]
    rules = [o for k, o in environment_objects(renders).items() if moved(k) and k[2].startswith("inference-rules-")]
    assert rules
    assert all(o["metadata"]["labels"][env["LABEL"]] == env["LABEL_VALUE"] for o in rules)
    assert all(o["metadata"]["namespace"] == env["NAMESPACE"] for o in rules)
    assert charts["grafana"]["values"]["rbac"] == {"create": True}  # the sidecar lists ConfigMaps
    dashboards = charts["grafana"]["values"]["sidecar"]["dashboards"]
    found = [
        o for k, o in environment_objects(renders).items() if moved(k) and k[2].startswith("inference-dashboards-")
    ]
    assert found
    assert all(o["metadata"]["labels"][dashboards["label"]] == dashboards["labelValue"] for o in found)


def test_a_shard_reads_its_platform_stack_through_a_stack_reference(renders: Path) -> None:
    manifests, charts, outputs = read_render(renders / SHARDS[0])
    assert not [c for c in charts if c.get("chart", "").endswith(("istiod", "prometheus"))]
    assert set(outputs) == {"models", "capacity"}
    platform_outputs = read_render(renders / PLATFORM)[2]
    facts = fleet.PlatformFacts.model_validate_json(platform_outputs[fleet.FACTS_OUTPUT])
    # A platform stack deployed when the facts were a mapping reads the same.
    as_mapping = {fleet.FACTS_OUTPUT: facts.model_dump(mode="json", by_alias=True)}
    assert fleet.read_facts("env-a", as_mapping, "acme/inference-platform/env", "inference-platform") == facts
    assert facts.shards == list(SHARDS)
    assert {entry.stack for entry in facts.directory.values()} == set(SHARDS)
    # No secret leaves the platform stack.
    assert facts.platform["grafana"]["adminPassword"] == fleet.SECRET
    assert "Secret" not in {m["kind"] for m in manifests}


# --- bad input, each at its line in the file that holds it ------------------------------------


def fleet_files(**changes: Any) -> dict[str, dict[str, Any]]:
    """A small environment: iris in env-a, bert (calling iris) in env-b."""
    base: dict[str, dict[str, Any]] = {
        PLATFORM: {f"{PREFIX}domain": "models.example.com", f"{PREFIX}{fleet.SHARDS_KEY}": ["env-a", "env-b"]},
        "env-a": {
            f"{PREFIX}{fleet.PLATFORM_STACK_KEY}": f"acme/inference-platform/{PLATFORM}",
            f"{PREFIX}models": [model("iris")],
        },
        "env-b": {
            f"{PREFIX}{fleet.PLATFORM_STACK_KEY}": f"acme/inference-platform/{PLATFORM}",
            f"{PREFIX}models": [model("bert", calls=["iris"])],
        },
    }
    for stack, change in changes.items():
        base[stack.replace("_", "-")] = change(copy.deepcopy(base[stack.replace("_", "-")]))
    return base


def model(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "runtime": "mlserver",
        "versions": [{"name": "v1", "modelUri": f"pvc://m/{name}", "weight": 100}],
    } | extra


def problems(capsys: Any, code: int, out: Path) -> list[str]:
    assert code == 2
    assert not out.exists()  # nothing written
    return [line.strip() for line in capsys.readouterr().err.splitlines() if "Pulumi." in line]


def reported(capsys: Any, code: int, out: Path) -> list[str]:
    """Every problem of the report, whatever file or directory it names."""
    assert code == 2
    assert not out.exists()  # nothing written
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("invalid stack config")
    return [line.strip() for line in lines[1:]]


def test_shards_that_disagree_with_their_platform_stack_are_reported_in_their_files(
    tmp_path: Path, capsys: Any
) -> None:
    def lost_reference(values: dict[str, Any]) -> dict[str, Any]:
        del values[f"{PREFIX}{fleet.PLATFORM_STACK_KEY}"]
        return values

    def platform_keys(values: dict[str, Any]) -> dict[str, Any]:
        return values | {f"{PREFIX}domain": "elsewhere.example.com"}

    paths = write(tmp_path, fleet_files(env_a=lost_reference, env_b=platform_keys))
    found = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    assert any(line.startswith(f"{paths['env-a']}:") and "set platformStack" in line for line in found), found
    assert any(
        line.startswith(f"{paths['env-b']}:") and "domain: belongs to the platform stack env" in line for line in found
    ), found


def test_a_model_in_two_shards_and_a_call_to_no_model_are_reported_in_each_file(tmp_path: Path, capsys: Any) -> None:
    def also_iris(values: dict[str, Any]) -> dict[str, Any]:
        values[f"{PREFIX}models"] += [model("iris"), model("gpt", calls=["nobody"])]
        return values

    paths = write(tmp_path, fleet_files(env_b=also_iris))
    found = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    where = {line.split(": ", 1)[0].rsplit(":", 2)[0] for line in found}
    assert where == {str(paths["env-b"])}, found
    # Reported once, at the repeat, naming the first in the other shard's file at its own index.
    twice = [line for line in found if "defined twice" in line]
    assert len(twice) == 1, found
    assert "models[1] (iris).name" in twice[0], found
    assert twice[0].endswith("(also models[0].name in Pulumi.env-a.yaml, the shard env-a)"), found
    assert any("models[2] (gpt).calls[0]" in line and "'nobody' is not a model" in line for line in found), found
    # Each at its own line: iris' name and gpt's call are at different places of env-b's file.
    assert len({line.split(": ", 1)[0] for line in found}) == len(found)


def test_a_platform_stack_holds_no_models(tmp_path: Path, capsys: Any) -> None:
    def with_model(values: dict[str, Any]) -> dict[str, Any]:
        return values | {f"{PREFIX}models": [model("stray")]}

    paths = write(tmp_path, fleet_files(env=with_model))
    (line,) = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    assert line.startswith(f"{paths[PLATFORM]}:")
    assert "models: a platform stack holds no models" in line


def test_a_shard_listed_twice_is_refused_by_the_render_as_by_stacks(tmp_path: Path, capsys: Any) -> None:
    """One check (fleet.repeated_shard), at the repeat's line: the render, `infra stacks` and the
    program under `pulumi up` (fleet.environment) refuse `shards: [env-a, env-b, env-a]` alike."""

    def twice(values: dict[str, Any]) -> dict[str, Any]:
        return values | {f"{PREFIX}{fleet.SHARDS_KEY}": ["env-a", "env-b", "env-a"]}

    paths = write(tmp_path / "stacks", fleet_files(env=twice))
    (line,) = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    assert line == f"{paths[PLATFORM]}:6:5: shards[2]: lists 'env-a' twice"
    (tmp_path / "stacks" / "Pulumi.yaml").write_text("name: inference-platform\nruntime: python\n", encoding="utf-8")
    assert main(["stacks", "--root", str(tmp_path / "stacks"), "--all"]) == 2
    assert [entry.strip() for entry in capsys.readouterr().err.splitlines() if "Pulumi." in entry] == [line]


def test_a_shard_listed_twice_is_reported_beside_a_missing_one(tmp_path: Path, capsys: Any) -> None:
    def twice_and_missing(values: dict[str, Any]) -> dict[str, Any]:
        return values | {f"{PREFIX}{fleet.SHARDS_KEY}": ["env-a", "env-b", "env-a", "env-z"]}

    paths = write(tmp_path / "stacks", fleet_files(env=twice_and_missing))
    found = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    assert found == [
        f"{paths[PLATFORM]}:6:5: shards[2]: lists 'env-a' twice",
        f"{paths[PLATFORM]}:7:5: shards[3]: the shard 'env-z' has no stack file beside this one (Pulumi.env-z.yaml)",
    ]


def values_in(node: Any) -> int:
    """The values a document holds, as config/limits.py counts them (itself and all below it)."""
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    return 1 + sum(values_in(child) for child in children)


def test_shards_within_one_stacks_limits_are_read_whatever_their_sum(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit on how much a stack file may expand to holds for each file, not for the models the
    platform stack gathers from all of them (10,000 models are far past one file's limit); a shard
    past it is refused in its own file."""
    files = fleet_files(env_b=lambda values: values | {f"{PREFIX}models": [model("bert"), model("gpt")]})
    sizes = {stack: values_in({"config": files[stack]}) for stack in files}
    gathered = values_in([m for shard in ("env-a", "env-b") for m in files[shard][f"{PREFIX}models"]])
    paths = write(tmp_path, files)
    monkeypatch.setattr(limits, "MAX_EXPANDED_NODES", max(sizes.values()))
    assert gathered > limits.MAX_EXPANDED_NODES  # past the limit together, each file within it
    assert render(PLATFORM, paths[PLATFORM], tmp_path / "out") == 0
    monkeypatch.setattr(limits, "MAX_EXPANDED_NODES", sizes["env-a"])
    assert sizes["env-b"] > limits.MAX_EXPANDED_NODES
    (line,) = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "again"), tmp_path / "again")
    assert line.startswith(f"{paths['env-b']}:")
    assert f"expands to more than {limits.MAX_EXPANDED_NODES} values" in line


@pytest.fixture
def platform_render(tmp_path: Path) -> tuple[dict[str, Path], Path]:
    paths = write(tmp_path / "stacks", fleet_files())
    assert render(PLATFORM, paths[PLATFORM], tmp_path / "out") == 0
    return paths, tmp_path / "out"


def test_a_shard_renders_on_its_platform_stacks_render(platform_render: tuple[dict[str, Path], Path]) -> None:
    paths, out = platform_render
    assert render("env-b", paths["env-b"], out) == 0
    manifests, _, _ = read_render(out / "env-b")
    # bert calls iris, which env-a holds: bert's pods may leave for iris' (the network), iris admits bert (its stack).
    (policy,) = [m for m in manifests if m["kind"] == "NetworkPolicy" and m["metadata"]["name"] == "bert"]
    assert {"podSelector": {"matchLabels": {"app": "iris"}}} in policy["spec"]["egress"][0]["to"]
    assert render("env-a", paths["env-a"], out) == 0
    (access,) = [
        m
        for m in read_render(out / "env-a")[0]
        if m["kind"] == "AuthorizationPolicy" and m["metadata"]["name"] == "iris-access"
    ]
    principals = [p for rule in access["spec"]["rules"] for src in rule["from"] for p in src["source"]["principals"]]
    assert "cluster.local/ns/service/sa/bert" in principals


def test_a_shard_growing_past_what_its_platform_installed_is_refused(
    platform_render: tuple[dict[str, Path], Path], capsys: Any
) -> None:
    """env-b adds a model spanning two nodes after its platform stack was rendered: no LeaderWorkerSet
    controller was installed for it, and the shard says to deploy the platform stack first."""
    paths, out = platform_render
    values = fleet_files()["env-b"]
    values[f"{PREFIX}models"].append(
        {
            "name": "big",
            "runtime": "vllm",
            "gpu": {"mode": "exclusive", "count": 8},
            "nodes": 2,
            "tensorParallelSize": 8,
            "versions": [{"name": "v1", "modelUri": "pvc://m/big", "weight": 100}],
        }
    )
    write_stack_file(paths["env-b"], values)
    (line,) = problems(capsys, render("env-b", paths["env-b"], out), out / "env-b")
    assert line.startswith(f"{paths['env-b']}:")
    assert "components: lws" in line
    assert "deploy it with this stack's file first" in line


def test_a_shard_on_a_stack_that_is_no_platform_stack_is_refused(tmp_path: Path, capsys: Any) -> None:
    paths = write(tmp_path / "stacks", fleet_files())
    single = write_stack_file(
        tmp_path / "stacks" / f"Pulumi.{PLATFORM}.yaml", {f"{PREFIX}domain": "models.example.com"}
    )
    assert render(PLATFORM, single, tmp_path / "out") == 0  # a whole environment in one stack
    (line,) = problems(capsys, render("env-a", paths["env-a"], tmp_path / "out"), tmp_path / "out" / "env-a")
    assert line.startswith(f"{paths['env-a']}:")
    assert "platformStack: acme/inference-platform/env is not a platform stack" in line


def test_a_shard_without_its_platform_stacks_render_renders_its_outputs_first(tmp_path: Path, capsys: Any) -> None:
    """No render of the platform stack beside the shard's (a CI job rendering one shard): its outputs
    come from the platform stack's file, rendered in the same process, and the shard's render is
    the one it makes on the platform's render."""
    paths = write(tmp_path / "stacks", fleet_files())
    assert render("env-a", paths["env-a"], tmp_path / "alone") == 0
    assert f"note: no render of env at {tmp_path / 'alone' / 'env'}" in capsys.readouterr().err
    assert render(PLATFORM, paths[PLATFORM], tmp_path / "out") == 0
    assert render("env-a", paths["env-a"], tmp_path / "out") == 0
    assert "note: no render" not in capsys.readouterr().err
    # The record of the stack files it rendered from is the same too: the files are the same.
    for name in (MANIFESTS, OUTPUTS, platform_record.PLATFORM_RENDER):
        assert (tmp_path / "alone" / "env-a" / name).read_bytes() == (tmp_path / "out" / "env-a" / name).read_bytes()


def test_a_shard_refuses_the_render_of_another_platform_at_its_platform_stack_key(tmp_path: Path, capsys: Any) -> None:
    """The platform stack `other` lists a shard env-a too (its own copy of the files): its render is
    a platform's render holding env-a, but not of the platform env-a's platformStack names."""
    paths = write(tmp_path / "stacks", fleet_files())
    renamed = {
        "other" if stack == PLATFORM else stack: {
            key: "acme/inference-platform/other" if key.endswith(fleet.PLATFORM_STACK_KEY) else value
            for key, value in values.items()
        }
        for stack, values in fleet_files().items()
    }
    others = write(tmp_path / "other-stacks", renamed)
    assert render("other", others["other"], tmp_path / "out") == 0
    out = tmp_path / "out" / "env-a"

    code = render("env-a", paths["env-a"], tmp_path / "out", "--platform-render", str(tmp_path / "out" / "other"))

    (line,) = problems(capsys, code, out)
    assert line == (
        f"{paths['env-a']}:2:3: platformStack: acme/inference-platform/env names the platform stack 'env', "
        "but the outputs read for it are the platform stack 'other''s (a render of another platform?)"
    )


def test_a_platform_stack_of_another_project_is_refused_by_every_reader(tmp_path: Path, capsys: Any) -> None:
    """acme/another-project/env ends in env, the platform stack beside it, but is another project's:
    the platform stack, the shard on its platform's render and `stacks` refuse it at the key."""
    reference = f"acme/another-project/{PLATFORM}"

    def elsewhere(values: dict[str, Any]) -> dict[str, Any]:
        return values | {f"{PREFIX}{fleet.PLATFORM_STACK_KEY}": reference}

    paths = write(tmp_path / "stacks", fleet_files(env_a=elsewhere))
    why = (
        f"{reference} names a stack of the project 'another-project', but this is the project "
        "'inference-platform': a shard's platform stack is of its own project (<org>/inference-platform/<stack>)"
    )
    (line,) = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    assert line == f"{paths['env-a']}:2:3: platformStack: {why}"

    write(tmp_path / "stacks", fleet_files())
    assert render(PLATFORM, paths[PLATFORM], tmp_path / "out") == 0
    write(tmp_path / "stacks", fleet_files(env_a=elsewhere))
    (line,) = problems(capsys, render("env-a", paths["env-a"], tmp_path / "out"), tmp_path / "out" / "env-a")
    assert line == f"{paths['env-a']}:2:3: platformStack: {why}"

    (tmp_path / "stacks" / "Pulumi.yaml").write_text("name: inference-platform\nruntime: python\n", encoding="utf-8")
    assert main(["stacks", "--root", str(tmp_path / "stacks"), "--all"]) == 2
    assert f"  {paths['env-a']}:2:3: platformStack: {why}" in capsys.readouterr().err.splitlines()


# --- a shard renders on a current platform render only ------------------------------------------


def stale(platform_render: Path, changed: Path, shard: str) -> str:
    """The problem (and, with the flag, the warning) of a shard on a platform render whose stack file `changed`."""
    return (
        f"{changed}: changed since the platform render {platform_render} read it "
        f"({platform_render / platform_record.STACK_FILES} holds another digest of it): render the platform "
        f"stack again first (infra render --stack {PLATFORM}), or pass {ALLOW_STALE_PLATFORM} to render {shard} "
        "on it as it is"
    )


def test_render_shards_writes_each_stacks_render_inside_out(tmp_path: Path) -> None:
    """`render --shards --out X`: X is the environment's directory, X/<stack> each stack's render
    (what `infra diff` of two environments reads); the platform's render records the stack files
    it read, and each shard's the record it rendered on."""
    paths = write(tmp_path / "stacks", fleet_files())
    assert render_environment(paths[PLATFORM], tmp_path / "out") == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out", "stacks"]
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [PLATFORM, "env-a", "env-b"]
    record = (tmp_path / "out" / PLATFORM / platform_record.STACK_FILES).read_text(encoding="utf-8")
    assert yaml.safe_load(record) == {
        "platform": PLATFORM,
        "program": __version__,
        "stackFiles": {stack: platform_record.file_digest(path) for stack, path in paths.items()},
    }
    for shard in ("env-a", "env-b"):
        assert (tmp_path / "out" / shard / platform_record.PLATFORM_RENDER).read_text(encoding="utf-8") == record


def test_a_shard_refuses_a_platform_render_whose_stack_file_changed_since(
    platform_render: tuple[dict[str, Path], Path], capsys: Any
) -> None:
    """The platform's file changed after its render was written (its domain here, as a cache
    turned off would): the shard refuses the render, naming the file and the render's record."""
    paths, out = platform_render
    values = fleet_files()[PLATFORM] | {f"{PREFIX}domain": "elsewhere.example.com"}
    write_stack_file(paths[PLATFORM], values)
    (line,) = problems(capsys, render("env-a", paths["env-a"], out), out / "env-a")
    assert line == stale(out / PLATFORM, paths[PLATFORM], "env-a")


def test_allow_stale_platform_renders_on_it_with_a_warning(
    platform_render: tuple[dict[str, Path], Path], capsys: Any
) -> None:
    paths, out = platform_render
    write_stack_file(paths[PLATFORM], fleet_files()[PLATFORM] | {f"{PREFIX}domain": "elsewhere.example.com"})
    assert render("env-a", paths["env-a"], out, ALLOW_STALE_PLATFORM) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {stale(out / PLATFORM, paths[PLATFORM], 'env-a')}"]
    # The shard's render says which platform render it read: the stale one's record.
    read = (out / "env-a" / platform_record.PLATFORM_RENDER).read_bytes()
    assert read == (out / PLATFORM / platform_record.STACK_FILES).read_bytes()


def test_a_comment_is_no_change_and_a_shards_own_file_is_its_own(
    platform_render: tuple[dict[str, Path], Path], capsys: Any
) -> None:
    """A digest is of the config the program reads: a comment in the platform's file changes
    nothing. A shard reads its own file itself, so its own edit leaves the render current for it,
    not for its neighbour, which reads the edited shard's models from the platform's render."""
    paths, out = platform_render
    with paths[PLATFORM].open("a", encoding="utf-8") as file:
        file.write("# a comment, and nothing else\n")
    edited = fleet_files()["env-a"]
    edited[f"{PREFIX}models"].append(model("gpt"))
    write_stack_file(paths["env-a"], edited)
    assert render("env-a", paths["env-a"], out) == 0
    assert "warning" not in capsys.readouterr().err
    (line,) = problems(capsys, render("env-b", paths["env-b"], out), out / "env-b")
    assert line == stale(out / PLATFORM, paths["env-a"], "env-b")
    paths["env-a"].unlink()
    (line,) = problems(capsys, render("env-b", paths["env-b"], out), out / "env-b")
    assert line == (
        f"{paths['env-a']}: is gone since the platform render {out / PLATFORM} read it "
        f"({out / PLATFORM / platform_record.STACK_FILES} records it): render the platform stack again first "
        f"(infra render --stack {PLATFORM}), or pass {ALLOW_STALE_PLATFORM} to render env-b on it as it is"
    )


def test_a_platform_render_without_a_record_or_of_another_version_is_refused(
    platform_render: tuple[dict[str, Path], Path], capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, out = platform_render
    again = (
        f"render the platform stack again first (infra render --stack {PLATFORM}), "
        f"or pass {ALLOW_STALE_PLATFORM} to render env-a on it as it is"
    )
    monkeypatch.setattr(platform_record, "__version__", "0.0.1")
    assert render(PLATFORM, paths[PLATFORM], out) == 0
    monkeypatch.undo()
    (line,) = reported(capsys, render("env-a", paths["env-a"], out), out / "env-a")
    record = out / PLATFORM / platform_record.STACK_FILES
    assert line == f"{record}: is a render by inference-platform 0.0.1, and this is {__version__}: {again}"
    record.unlink()  # a render written before renders held a record
    (line,) = reported(capsys, render("env-a", paths["env-a"], out), out / "env-a")
    assert line == (
        f"{out / PLATFORM}: holds no {platform_record.STACK_FILES}, the record of the stack files a platform "
        f"stack's render read (a render by an older inference-platform): {again}"
    )


def test_a_named_platform_render_that_is_not_one_says_what_to_render(tmp_path: Path, capsys: Any) -> None:
    paths = write(tmp_path / "stacks", fleet_files())
    assert render("env-a", paths["env-a"], tmp_path / "out", "--platform-render", str(tmp_path / "none")) == 2
    assert f"--platform-render {tmp_path / 'none'} holds no render of env (infra render --stack env)" in (
        capsys.readouterr().err
    )


def test_a_shard_overflowing_the_environments_gpus_is_refused_with_the_numbers(tmp_path: Path, capsys: Any) -> None:
    def gpus(count: int) -> dict[str, Any]:
        return model("llm", runtime="vllm", gpu={"mode": "exclusive", "count": count}, tensorParallelSize=count)

    files = fleet_files()
    files[PLATFORM][f"{PREFIX}platform"] = {"gpuNodes": {"count": 1, "gpusPerNode": 8}}
    files["env-a"][f"{PREFIX}models"].append(gpus(6))
    paths = write(tmp_path / "stacks", files)
    out = tmp_path / "out"
    assert render(PLATFORM, paths[PLATFORM], out) == 0
    files["env-b"][f"{PREFIX}models"].append(gpus(4) | {"name": "llm-b"})
    write_stack_file(paths["env-b"], files["env-b"])
    (line,) = problems(capsys, render("env-b", paths["env-b"], out), out / "env-b")
    assert "the models need 10 GPUs" in line
    assert "(4 here, 6 in the environment's other stacks)" in line
    assert "more than the 8 declared" in line


# --- the tools ----------------------------------------------------------------------------------


def test_promote_edits_the_shard_that_holds_the_model(tmp_path: Path, capsys: Any) -> None:
    files = fleet_files()
    files["env-b"][f"{PREFIX}models"][0]["versions"] = [
        {"name": "v1", "modelUri": "pvc://m/bert/1", "weight": 100},
        {"name": "v2", "modelUri": "pvc://m/bert/2", "weight": 0},
    ]
    paths = write(tmp_path, files)
    before = {stack: path.read_text() for stack, path in paths.items()}
    code = main(
        [
            "promote",
            "--stack",
            PLATFORM,
            "--config",
            str(paths[PLATFORM]),
            "--model",
            "bert",
            "--weights",
            "v1=90,v2=10",
        ]
    )
    assert code == 0
    report = capsys.readouterr().out
    assert "VirtualService service/bert" in report
    assert paths["env-b"].read_text() != before["env-b"]
    assert {stack: path.read_text() for stack, path in paths.items() if stack != "env-b"} == {
        stack: text for stack, text in before.items() if stack != "env-b"
    }
    weights = {
        v["name"]: v["weight"]
        for v in yaml.safe_load(paths["env-b"].read_text())["config"][f"{PREFIX}models"][0]["versions"]
    }
    assert weights == {"v1": 90, "v2": 10}


def test_capacity_takes_a_shard_or_the_whole_environment(tmp_path: Path, capsys: Any) -> None:
    files = fleet_files()
    files["env-a"][f"{PREFIX}models"].append(
        model("llm", runtime="vllm", gpu={"mode": "exclusive", "count": 2}, tensorParallelSize=2)
    )
    files["env-b"][f"{PREFIX}models"].append(
        model("llm-b", runtime="vllm", gpu={"mode": "exclusive", "count": 4}, tensorParallelSize=4)
    )
    paths = write(tmp_path, files)
    found = {}
    for stack in (PLATFORM, "env-a", "env-b"):
        assert main(["capacity", "--stack", stack, "--config", str(paths[stack]), "--format", "json"]) == 0
        found[stack] = json.loads(capsys.readouterr().out)["gpus"]["min"]
    assert found == {PLATFORM: 6, "env-a": 2, "env-b": 4}


def test_the_chart_objects_of_a_shard_are_its_own(tmp_path: Path) -> None:
    """A shard's render expands only its own charts (its inference pools'): the platform's are its platform stack's."""
    files = fleet_files()
    files["env-b"][f"{PREFIX}models"].append(model("chat", runtime="vllm", gpu="exclusive", routing="inference-pool"))
    paths = write(tmp_path / "stacks", files)
    out = tmp_path / "out"
    assert render(PLATFORM, paths[PLATFORM], out) == 0
    assert render("env-b", paths["env-b"], out) == 0
    assert [c["name"] for c in read_render(out / "env-b")[1]] == ["chat-v1"]
    assert read_chart_objects(out / "env-b") == {}  # --no-charts


def test_diff_takes_a_whole_environment(tmp_path: Path, capsys: Any) -> None:
    """Two renders of the environment (render --shards): each stack's report, the stacks a change
    left alone named once. A model added to env-b changes env-b and the platform's directory."""
    paths = write(tmp_path / "stacks", fleet_files())
    assert render_environment(paths[PLATFORM], tmp_path / "before") == 0
    added = fleet_files(env_b=lambda values: values | {f"{PREFIX}models": [*values[f"{PREFIX}models"], model("gpt")]})
    write(tmp_path / "stacks", added)
    assert render_environment(paths[PLATFORM], tmp_path / "after") == 0
    capsys.readouterr()

    assert main(["diff", str(tmp_path / "before"), str(tmp_path / "after")]) == 0
    report = capsys.readouterr().out
    assert report.startswith("## inference-platform render diff: an environment\n\n2 of 3 stacks changed. ")
    assert "No changes: `env-a`." in report
    sections = [line for line in report.splitlines() if line.startswith("## inference-platform render diff: stack")]
    assert sections == [
        "## inference-platform render diff: stack `env`",
        "## inference-platform render diff: stack `env-b`",
    ]
    assert "Added: <code>Deployment service/gpt-v1 (apps/v1)</code>" in report
    assert "Removed:" not in report
    # The platform's facts, one JSON document in its outputs, compared field by field.
    assert "| `inferencePlatform.directory.gpt` | —" in report

    # One stack's render against an environment's: refused, as neither reads as the other.
    assert main(["diff", str(tmp_path / "before" / "env-a"), str(tmp_path / "after")]) == 2
    assert "diff two of a kind" in capsys.readouterr().err


def test_a_stack_of_its_own_listed_as_a_shard_is_one_problem(tmp_path: Path, capsys: Any) -> None:
    """A whole stack's file (a domain, a namespace, no platformStack) among the shards: one mistake, one
    line, not one per key it holds and another for the reference it lacks."""

    def whole_stack(values: dict[str, Any]) -> dict[str, Any]:
        del values[f"{PREFIX}{fleet.PLATFORM_STACK_KEY}"]
        return values | {f"{PREFIX}domain": "elsewhere.example.com", f"{PREFIX}namespace": "other"}

    paths = write(tmp_path, fleet_files(env_b=whole_stack))
    (line,) = problems(capsys, render(PLATFORM, paths[PLATFORM], tmp_path / "out"), tmp_path / "out" / PLATFORM)
    assert line == (
        f"{paths['env-b']}: is a stack of its own (it sets domain, namespace), listed as a shard of the platform "
        f"stack {PLATFORM} (its `shards`): drop it from them, or make it a shard (set platformStack, and leave the "
        "platform's settings to the platform stack)"
    )


def test_a_shard_its_platform_stack_does_not_list_is_one_problem(
    platform_render: tuple[dict[str, Path], Path], capsys: Any
) -> None:
    """A shard the platform stack does not list: its models' needs were never read by the platform, which
    is the same mistake, not a second line."""
    paths, out = platform_render
    values = fleet_files()["env-b"]
    values[f"{PREFIX}models"] = [
        {
            "name": "big",
            "runtime": "vllm",
            "gpu": {"mode": "exclusive", "count": 8},
            "nodes": 2,
            "tensorParallelSize": 8,
            "versions": [{"name": "v1", "modelUri": "pvc://m/big", "weight": 100}],
        }
    ]
    stray = write_stack_file(paths["env-b"].with_name("Pulumi.env-c.yaml"), values)
    (line,) = problems(capsys, render("env-c", stray, out), out / "env-c")
    assert line == f"{stray}:2:3: platformStack: the platform stack {PLATFORM} does not list this stack in its shards"
