"""LoRA adapters on vLLM and SGLang: how a version's adapters reach its pods (fetched like the model,
each into its own directory), what the config refuses (at the stack file's line and column, all at
once, nothing written), and what the capacity plan says they add. The engines' own parsers read
the command lines in runtimes/test_vllm_parser.py and test_sglang_parser.py."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from kubernetes.utils import parse_quantity

from inference_platform.cli.main import main
from inference_platform.serving.inference_service import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.lora import ADAPTER_DIR
from inference_platform.serving.model_storage import StorageCredentials, initializer_env
from inference_platform.serving.runtimes.base import PREDICTOR_CONTAINER
from inference_platform.serving.runtimes.llm_engine import LLMEngineModel
from inference_platform.stack.config import parse_stack_config, project_values
from tests.conftest import RUNTIME_MINIMUMS, full_config, write_stack_file
from tests.owner_schemas import validate
from tests.serving.test_model_storage import file_server, run_initializer  # noqa: F401 (a fixture)

CREDENTIALS = StorageCredentials.model_validate(
    {
        "s3": {"endpoint": "https://minio.example.com:9000", "accessKeyId": "id", "secretAccessKey": "key"},
        "huggingface": {"token": "t"},
    }
)
ADAPTERS = [
    {"name": "sql", "uri": "s3://adapters/llama/sql"},
    {"name": "support", "uri": "hf://acme/llama-support-lora", "downloadSize": "512Mi"},
    # On the model's own claim, and on another claim, twice: mounted, never copied.
    {"name": "legal", "uri": "pvc://models/adapters/legal"},
    {"name": "french", "uri": "pvc://adapters/llama/french"},
    {"name": "german", "uri": "pvc://adapters/llama/german"},
]


def objects(model_uri: str, adapters: list[dict[str, Any]] = ADAPTERS) -> dict[tuple[str, str], dict[str, Any]]:
    model = {
        "name": "llama",
        "runtime": "vllm",
        "gpu": "exclusive",
        "versions": [{"name": "v1", "modelUri": model_uri, "weight": 100, "adapters": adapters}],
    }
    args = InferenceServiceArgs.model_validate(
        {"model": model, "namespace": "service", "domain": "models.example.com", "storage": CREDENTIALS.access("creds")}
    )
    rendered = {(o["kind"], o["metadata"]["name"]): o for o in model_manifests(args)}
    for manifest in rendered.values():
        validate(manifest)
    return rendered


def pod(rendered: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = rendered[("Deployment", "llama-v1")]["spec"]["template"]["spec"]
    return spec


def predictor_mounts(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (predictor,) = (c for c in spec["containers"] if c["name"] == PREDICTOR_CONTAINER)
    return {m["mountPath"]: m for m in predictor["volumeMounts"]}


def test_each_downloaded_adapter_is_fetched_like_the_model_into_its_own_directory() -> None:
    spec = pod(objects("s3://models/llama-3.1-8b"))
    model, sql, support = spec["initContainers"]
    assert model["name"] == "storage-initializer"
    assert (sql["name"], support["name"]) == ("adapter-sql", "adapter-support")
    assert sql["args"] == ["s3://adapters/llama/sql", "/mnt/models"]
    assert support["args"] == ["hf://acme/llama-support-lora", "/mnt/models"]
    # The same image, credentials (as files from the Secret), user and hardening as the model's download.
    for download, scheme in ((sql, "s3"), (support, "hf")):
        env, mounts_secret = initializer_env(scheme, CREDENTIALS.access("creds"))
        assert mounts_secret
        assert download["env"] == env
        assert download["image"] == model["image"]
        assert download["securityContext"] == model["securityContext"]
        assert download["volumeMounts"][1:] == model["volumeMounts"][1:]  # scratch and the Secret
        # Its own volume, which the server reads read-only at /mnt/adapters/<name>.
        (written,) = (m for m in download["volumeMounts"] if m["mountPath"] == "/mnt/models")
        assert predictor_mounts(spec)[f"{ADAPTER_DIR}/{download['name'].removeprefix('adapter-')}"] == {
            "name": written["name"],
            "mountPath": f"{ADAPTER_DIR}/{download['name'].removeprefix('adapter-')}",
            "readOnly": True,
        }
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["adapter-sql"] == {"name": "adapter-sql", "emptyDir": {"sizeLimit": "2Gi"}}
    assert volumes["adapter-support"] == {"name": "adapter-support", "emptyDir": {"sizeLimit": "512Mi"}}
    assert [v["name"] for v in spec["volumes"]].count("model-storage-credentials") == 1


def test_each_download_requests_the_disk_the_pods_downloads_hold_when_it_is_done() -> None:
    """Init containers run one after another and the scheduler takes the largest request of them, so
    each download asks for everything written so far, its own included: the last asks for all."""
    spec = pod(objects("s3://models/llama-3.1-8b"))
    requests = [parse_quantity(c["resources"]["requests"]["ephemeral-storage"]) for c in spec["initContainers"]]
    volumes = {v["name"]: v for v in spec["volumes"]}
    written = [
        next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/mnt/models") for c in spec["initContainers"]
    ]
    sizes = [parse_quantity(volumes[name]["emptyDir"]["sizeLimit"]) for name in written]
    assert requests == [sum(sizes[: i + 1]) for i in range(len(sizes))]
    assert requests[-1] == parse_quantity("20Gi") + parse_quantity("2Gi") + parse_quantity("512Mi")


def test_adapters_on_claims_are_mounted_sharing_the_models_volume_or_one_per_claim() -> None:
    spec = pod(objects("pvc://models/llama-3.1-8b"))
    mounts = predictor_mounts(spec)
    assert mounts["/mnt/adapters/legal"] == {
        "name": "model-files",
        "mountPath": "/mnt/adapters/legal",
        "readOnly": True,
        "subPath": "adapters/legal",
    }
    assert mounts["/mnt/adapters/french"]["name"] == mounts["/mnt/adapters/german"]["name"] == "adapter-french"
    assert mounts["/mnt/adapters/german"]["subPath"] == "llama/german"
    claims = [v["persistentVolumeClaim"] for v in spec["volumes"] if "persistentVolumeClaim" in v]
    assert claims == [{"claimName": "models", "readOnly": True}, {"claimName": "adapters", "readOnly": True}]
    # No model download: the adapters' downloads request from nothing.
    sql, support = spec["initContainers"]
    assert (
        sql["resources"]["requests"]["ephemeral-storage"],
        support["resources"]["requests"]["ephemeral-storage"],
    ) == (
        "2Gi",
        "2560Mi",
    )


def test_the_versions_way_out_covers_its_adapters_downloads() -> None:
    """A mounted model with downloaded adapters gets the version's download policy, on every port
    its downloads use (the S3 endpoint's 9000, Hugging Face's 443)."""
    download = objects("pvc://models/llama-3.1-8b")[("NetworkPolicy", "llama-v1-download")]["spec"]
    (egress,) = download["egress"]
    assert [p["port"] for p in egress["ports"]] == [443, 9000]
    mounted_only = objects("pvc://models/llama-3.1-8b", [a for a in ADAPTERS if a["uri"].startswith("pvc://")])
    assert ("NetworkPolicy", "llama-v1-download") not in mounted_only


def test_kserves_storage_code_puts_an_adapter_where_the_engine_reads_it(
    file_server: tuple[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base, served = file_server
    with tarfile.open(served / "sql-lora.tar", "w") as archive:
        for name, data in (("adapter_config.json", b'{"r": 16}'), ("adapter_model.safetensors", b"weights")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    spec = pod(objects("pvc://models/llama-3.1-8b", [{"name": "sql", "uri": f"{base}/sql-lora.tar"}]))
    (download,) = spec["initContainers"]
    volume = tmp_path / "adapter-sql"

    run_initializer(download, volume, monkeypatch)

    # What the init container wrote is the volume the server mounts where --lora-modules points.
    assert predictor_mounts(spec)["/mnt/adapters/sql"]["name"] == download["volumeMounts"][0]["name"]
    assert (volume / "adapter_config.json").read_bytes() == b'{"r": 16}'
    assert (volume / "adapter_model.safetensors").exists()


# --- bad input: at the stack file's line and column, every problem at once, nothing written ---------


def model(name: str, runtime: str, versions: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    return RUNTIME_MINIMUMS[runtime] | {"name": name, "versions": versions} | settings


def version(name: str, adapters: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    return {"name": name, "modelUri": f"pvc://models/{name}", "weight": 100, "adapters": adapters} | settings


def adapter(name: str) -> dict[str, Any]:
    return {"name": name, "uri": f"pvc://adapters/{name}"}


def problems(config: dict[str, Any], tmp_path: Path, capsys: Any) -> list[str]:
    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", config)
    assert main(["render", "--stack", "t", "--config", str(stack_file), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()  # nothing written
    return [line for line in capsys.readouterr().err.splitlines() if "Pulumi.t.yaml:" in line]


def test_bad_adapters_are_reported_at_their_lines_all_at_once(tmp_path: Path, capsys: Any) -> None:
    models = [
        model("iris", "mlserver", [version("v1", [adapter("sql")])]),
        model("dupe", "vllm", [version("v1", [adapter("sql"), adapter("chat"), adapter("sql")])]),
        model("versioned", "sglang", [version("v1", [adapter("v2")]), version("v2", [], weight=0)]),
        model("own", "vllm", [version("v1", [adapter("own")])]),
        model("few", "sglang", [version("v1", [adapter("a"), adapter("b"), adapter("c")])], maxLoras=2),
        model("spelt", "vllm", [version("v1", [adapter("Not_A_Name")])]),
        model("rank", "vllm", [version("v1", [adapter("a")])], maxLoraRank=24),
        model("idle", "sglang", [version("v1", [])], maxLoras=2, maxLoraRank=8),
        model("flagged", "vllm", [version("v1", [adapter("a")], args=["--max-loras=8"])], args=["--enable-lora"]),
        model("bucket", "vllm", [version("v1", [{"name": "a", "uri": "s3://adapters/a"}])]),
    ]
    found = problems(
        {"inference-platform:domain": "models.example.com", "inference-platform:models": models}, tmp_path, capsys
    )
    expected = [
        (0, "versions[0] (v1).adapters: ", "mlserver does not serve LoRA adapters"),
        (
            1,
            "versions[0] (v1).adapters[2] (sql).name: ",
            "adapter 'sql' is defined twice (also versions[0].adapters[0].name)",
        ),
        (2, "versions[0] (v1).adapters[0] (v2).name: ", "'v2' is the name of a version of this model"),
        (3, "versions[0] (v1).adapters[0] (own).name: ", "'own' is the model's own name"),
        (4, "maxLoras: ", "2 is fewer than the 3 adapters versions[0] (v1) lists"),
        (5, "versions[0] (v1).adapters[0] (Not_A_Name).name: ", "'Not_A_Name' is not a valid adapter name"),
        (6, "maxLoraRank: ", "vLLM takes one of 1, 8, 16, 32, 64, 128, 256, 320, 512"),
        (7, "maxLoras: ", "no version lists adapters"),
        (7, "maxLoraRank: ", "no version lists adapters"),
        (8, "args[0]: ", "--enable-lora is set by the platform"),
        (8, "versions[0] (v1).args[0]: ", "--max-loras is set by the platform"),
        (9, "versions[0] (v1).adapters[0] (a).uri: ", "s3:// needs credentials"),
    ]
    assert len(found) == len(expected), found
    for index, path, text in expected:
        where = f"models[{index}] ({models[index]['name']}).{path}"
        assert any(where in line and text in line for line in found), (where, found)
    assert all(line.split("Pulumi.t.yaml:")[1].split(":")[0].isdigit() for line in found)


def test_the_same_adapter_name_may_serve_on_several_versions() -> None:
    """A canary serves the primary's adapters: names are unique within a version, not across them."""
    config = {
        "inference-platform:domain": "models.example.com",
        "inference-platform:models": [
            model(
                "llama",
                "vllm",
                [version("v1", [adapter("sql")], weight=90), version("v2", [adapter("sql")], weight=10)],
            )
        ],
    }
    (llama,) = parse_stack_config(project_values(config)).models
    assert llama.served_adapters == ["sql"]


def test_every_version_that_takes_requests_and_every_shadow_serves_the_adapters(tmp_path: Path, capsys: Any) -> None:
    """Requests reach a version by the weights (a shadow by its mirror) whatever adapter they name: a
    version without the adapter would refuse its share. A version at weight 0 takes none: it may lack them."""
    models = [
        model(
            "canary",
            "vllm",
            [version("v2", [adapter("support")], weight=90), version("v3", [], weight=10)],
        ),
        model(
            "shadowed",
            "sglang",
            [
                version("v1", [adapter("sql"), adapter("chat")]),
                version("v2", [adapter("chat")], weight=None, mirrorPercent=10),
            ],
        ),
        model(
            "crossed",
            "vllm",
            [version("v1", [adapter("a")], weight=50), version("v2", [adapter("b")], weight=50)],
        ),
        model("staged", "vllm", [version("v1", [adapter("sql")]), version("v2", [], weight=0)]),
    ]
    found = problems(
        {"inference-platform:domain": "models.example.com", "inference-platform:models": models}, tmp_path, capsys
    )
    expected = [
        "models[0] (canary).versions[1] (v3).name: v3 lacks adapter(s) 'support' (served by v2): it takes its share",
        "models[1] (shadowed).versions[1] (v2).adapters: v2 lacks adapter(s) 'sql' (served by v1): a shadow",
        "models[2] (crossed).versions[0] (v1).adapters: v1 lacks adapter(s) 'b' (served by v2)",
        "models[2] (crossed).versions[1] (v2).adapters: v2 lacks adapter(s) 'a' (served by v1)",
    ]
    assert len(found) == len(expected), found
    for text in expected:
        assert any(text in line for line in found), (text, found)


# --- what the outputs and the capacity plan say ------------------------------------------------


def test_only_what_live_versions_serve_gets_a_curl_line() -> None:
    config = {
        "inference-platform:domain": "models.example.com",
        "inference-platform:models": [
            model(
                "qwen",
                "sglang",
                [
                    version("v1", [adapter("sql"), adapter("chat")]),
                    version("v2", [adapter("chat"), adapter("sql"), adapter("draft")], weight=None, mirrorPercent=10),
                    version("v3", [adapter("next")], weight=0),
                ],
            )
        ],
    }
    (qwen,) = parse_stack_config(project_values(config)).models
    # The shadow's draft is reached only through mirroring, the idle version's next not at all.
    assert qwen.served_adapters == ["sql", "chat"]
    assert isinstance(qwen, LLMEngineModel)
    assert qwen.adapter_request("chat").body["model"] == "qwen:chat"


def test_the_capacity_plan_shows_the_slots_adapters_take_per_pod(tmp_path: Path, capsys: Any) -> None:
    config = full_config(decrypted=True)
    plan = parse_stack_config(project_values(config)).capacity()
    figures = plan.as_json()["models"]
    # llama (vLLM): a slot per adapter of a batch, at the rank set.
    assert figures["llama"]["lora"] == {"adapters": 2, "maxLoras": 2, "slotsPerPod": 2, "maxLoraRank": 32}
    # qwen (SGLang): maxLoras 2 for one adapter, and the base model's slot; the rank left to SGLang.
    assert figures["qwen"]["lora"] == {"adapters": 1, "maxLoras": 2, "slotsPerPod": 3, "maxLoraRank": None}
    assert not any("lora" in figures[name] for name in figures if name not in ("llama", "qwen"))
    # Adapters hold no devices of their own: the GPU figures are a model's without them.
    without = full_config(decrypted=True)
    for entry in without["inference-platform:models"]:
        for item in entry["versions"]:
            item.pop("adapters", None)
        entry.pop("maxLoras", None)
        entry.pop("maxLoraRank", None)
    bare = parse_stack_config(project_values(without)).capacity().as_json()
    assert {k: v for k, v in figures["llama"].items() if k != "lora"} == bare["models"]["llama"]
    assert plan.as_json()["gpus"] == bare["gpus"]
    notes = [note for note in plan.notes if "LoRA" in note]
    assert len(notes) == 2
    assert notes[0].startswith("llama: 2 LoRA adapter slot(s) per pod of rank up to 32")
    assert "not counted" in notes[0]

    stack_file = write_stack_file(tmp_path / "Pulumi.t.yaml", full_config())
    assert main(["capacity", "--stack", "t", "--config", str(stack_file)]) == 0
    printed = capsys.readouterr().out
    assert "LoRA slots a pod" in printed
    assert "note: qwen: 3 LoRA adapter slot(s) per pod of the engine's rank (maxLoraRank unset)" in printed.replace(
        "\n", " "
    )
