"""A stack using every runtime, GPU mode and download scheme renders objects their owners accept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inference_platform.cli.render import RenderResult
from inference_platform.cli.render_files import MANIFESTS, OUTPUTS, manifest_documents, render_texts
from tests.conftest import SECRET_VALUES, full_config
from tests.owner_schemas import validate

Render = Callable[[dict[str, Any]], RenderResult]


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    from inference_platform.cli.main import main
    from inference_platform.cli.render_files import read_render
    from tests.conftest import secured, write_stack_file

    root = tmp_path_factory.mktemp("full")
    stack_file = write_stack_file(root / "Pulumi.full.yaml", secured(full_config()))
    assert main(["render", "--stack", "full", "--config", str(stack_file), "--out", str(root / "out")]) == 0
    rendered, _, _ = read_render(root / "out")
    return rendered


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name)


def pod(manifests: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = find(manifests, "Deployment", name)["spec"]["template"]["spec"]
    return spec


def container(manifests: list[dict[str, Any]], name: str, container_name: str = "predictor") -> dict[str, Any]:
    return next(c for c in pod(manifests, name)["containers"] if c["name"] == container_name)


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_every_object_passes_its_owners_schema(manifests: list[dict[str, Any]]) -> None:
    assert len(manifests) > 40
    for manifest in manifests:
        validate(manifest)


def test_secret_values_never_appear_in_the_render(render_config: Render) -> None:
    """The values decrypted, as `pulumi up` hands them to the program (an offline render of the
    stack file never sees them: its secure values are placeholders)."""
    texts = render_texts(render_config(full_config(decrypted=True)))
    text = texts[MANIFESTS] + texts[OUTPUTS]
    for value in SECRET_VALUES:
        assert value not in text
    assert "s3-secret" not in text
    assert "gcs-key" not in text


def test_storage_credentials_are_a_secret_whose_values_are_pulumi_secrets(render_config: Render) -> None:
    result = render_config(full_config(decrypted=True))
    secret = next(
        r
        for r in result.registrations
        if r.type == "kubernetes:core/v1:Secret" and r.inputs["metadata"]["name"] == "model-storage-credentials"
    )
    # Registered as Pulumi secrets (masked by the render), so state and previews keep them hidden.
    assert secret.inputs["stringData"] == {
        "aws-credentials": "[secret]",
        "gcs-service-account.json": "[secret]",
        "hf-token": "[secret]",
    }
    assert not any(value in str(result.outputs) for value in SECRET_VALUES)


def test_downloads_run_the_storage_initializer_into_the_runtimes_layout(manifests: list[dict[str, Any]]) -> None:
    spec = pod(manifests, "mnist-v1")
    (init,) = spec["initContainers"]
    assert init["name"] == "storage-initializer"
    assert init["args"] == ["s3://models/mnist/1", "/mnt/models"]
    assert env(init)["AWS_ENDPOINT_URL"] == "https://minio.example.com"
    assert env(init)["AWS_DEFAULT_REGION"] == "eu-west-1"
    # Credentials come as files from the Secret, never as environment variables.
    assert env(init)["AWS_SHARED_CREDENTIALS_FILE"] == "/var/run/secrets/model-storage/aws-credentials"
    assert "AWS_SECRET_ACCESS_KEY" not in env(init)
    assert {"name": "model-storage-credentials", "secret": {"secretName": "model-storage-credentials"}} in spec[
        "volumes"
    ]
    volume = next(v for v in spec["volumes"] if v["name"] == "model-files")
    assert volume == {"name": "model-files", "emptyDir": {"sizeLimit": "20Gi"}}
    predictor_mount = next(m for m in container(manifests, "mnist-v1")["volumeMounts"] if m["name"] == "model-files")
    assert predictor_mount == {"name": "model-files", "mountPath": "/models/mnist/1", "readOnly": True}


def test_gcs_and_hugging_face_downloads_get_their_credentials(manifests: list[dict[str, Any]]) -> None:
    (gcs,) = pod(manifests, "resnet-v1")["initContainers"]
    assert env(gcs)["GOOGLE_APPLICATION_CREDENTIALS"] == "/var/run/secrets/model-storage/gcs-service-account.json"
    assert {
        "name": "model-storage-credentials",
        "mountPath": "/var/run/secrets/model-storage",
        "readOnly": True,
    } in gcs["volumeMounts"]
    # The model's download first, then its LoRA adapters' (from S3 and Hugging Face), each with the
    # stack's credentials.
    hf, sql, support = pod(manifests, "llama-v1")["initContainers"]
    assert env(hf)["HF_TOKEN_PATH"] == "/var/run/secrets/model-storage/hf-token"
    assert hf["args"] == ["hf://meta-llama/Llama-3.1-8B-Instruct", "/mnt/models"]
    assert env(sql)["AWS_SHARED_CREDENTIALS_FILE"] == "/var/run/secrets/model-storage/aws-credentials"
    assert env(support)["HF_TOKEN_PATH"] == "/var/run/secrets/model-storage/hf-token"
    assert [sql["name"], support["name"]] == ["adapter-sql", "adapter-support"]


def test_pvc_models_are_mounted_read_only_without_a_download(manifests: list[dict[str, Any]]) -> None:
    spec = pod(manifests, "embed-v1")
    assert "initContainers" not in spec
    volume = next(v for v in spec["volumes"] if v["name"] == "model-files")
    assert volume["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
    mount = next(m for m in container(manifests, "embed-v1")["volumeMounts"] if m["name"] == "model-files")
    assert mount == {"name": "model-files", "mountPath": "/models/embed/1", "readOnly": True, "subPath": "embed/1"}


def test_gpu_modes_shape_the_pods(manifests: list[dict[str, Any]]) -> None:
    exclusive = container(manifests, "mnist-v1")
    assert exclusive["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert pod(manifests, "mnist-v1")["nodeSelector"] == {"gpu": "on"}
    assert "NVIDIA_VISIBLE_DEVICES" not in env(exclusive)

    vgpu = container(manifests, "resnet-v1")["resources"]["limits"]
    assert (vgpu["nvidia.com/gpu"], vgpu["nvidia.com/gpumem-percentage"], vgpu["nvidia.com/gpucores"]) == (
        "1",
        "25",
        "30",
    )
    assert pod(manifests, "resnet-v1")["nodeSelector"] == {"gpu": "on"}
    assert pod(manifests, "resnet-v1")["tolerations"]

    shared = container(manifests, "embed-v1")
    assert env(shared)["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert not any(key.startswith("nvidia.com/") for key in shared["resources"].get("limits", {}))

    cpu = container(manifests, "iris-v1")
    assert env(cpu)["NVIDIA_VISIBLE_DEVICES"] == "none"
    assert "nodeSelector" not in pod(manifests, "iris-v1")


def test_vllm_under_a_vgpu_cap_is_sized_to_it(manifests: list[dict[str, Any]]) -> None:
    llama = container(manifests, "llama-v1")
    assert llama["resources"]["limits"]["nvidia.com/gpumem"] == "40960"
    assert "--gpu-memory-utilization=0.95" in llama["args"]


def test_a_transformer_fronts_the_predictor(manifests: list[dict[str, Any]]) -> None:
    spec = pod(manifests, "bert-v1")
    transformer, predictor = spec["containers"]
    assert transformer["name"] == "transformer"
    assert env(transformer)["PREDICTOR_HOST"] == "localhost:8080"
    assert env(transformer)["NVIDIA_VISIBLE_DEVICES"] == "none"
    assert transformer["ports"] == [{"name": "http", "containerPort": 9080, "protocol": "TCP"}]
    assert transformer["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9080}
    assert {p["name"] for p in predictor["ports"]} == {"http-predictor", "http-metrics"}

    service = find(manifests, "Service", "bert")
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    version_service = find(manifests, "Service", "bert-v1")
    assert {p["name"]: p["port"] for p in version_service["spec"]["ports"]} == {
        "http": 9080,
        "http-predictor": 8080,
        "http-metrics": 8082,
    }
    template = find(manifests, "Deployment", "bert-v1")["spec"]["template"]["metadata"]["annotations"]
    assert template["prometheus.io/port"] == "8082"  # the predictor's metrics stay scraped


def test_every_container_is_hardened(manifests: list[dict[str, Any]]) -> None:
    for deployment in (m for m in manifests if m["kind"] == "Deployment"):
        spec = deployment["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        for item in spec["containers"] + spec.get("initContainers", []):
            assert item["securityContext"]["allowPrivilegeEscalation"] is False
            assert item["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert item["resources"]["requests"]
            assert item["resources"]["limits"]


def test_every_image_is_pinned(manifests: list[dict[str, Any]]) -> None:
    images = {
        c["image"]
        for m in manifests
        if m["kind"] == "Deployment"
        for c in m["spec"]["template"]["spec"]["containers"] + m["spec"]["template"]["spec"].get("initContainers", [])
    }
    assert len(images) >= 6
    for image in images:
        tag = image.rsplit("/", 1)[-1].partition(":")[2]
        assert tag, image
        assert tag != "latest", image


def test_manifest_order_is_stable(render_config: Render) -> None:
    first = manifest_documents(render_config(full_config()))
    second = manifest_documents(render_config(full_config()))
    assert first == second
