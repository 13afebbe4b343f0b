"""The Pipeline component through Pulumi's mocks: its children, parents and outputs."""

from __future__ import annotations

from typing import Any

import pulumi

from inference_platform.cli.render import RenderResult
from inference_platform.serving.pipeline import Pipeline
from tests.conftest import PIPELINES
from tests.serving.pipeline.test_manifests import args

TYPE = "inference-platform:serving:Pipeline"
BODY = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [0.5]}]}


@pulumi.runtime.test
def test_outputs_are_urls_a_curl_line_and_the_models_called(pulumi_mocks: RenderResult) -> pulumi.Output[Any]:
    pipeline = Pipeline("churn-ab", args(PIPELINES[1]).model_copy(update={"example_body": BODY}))

    def check(values: list[Any]) -> None:
        urls, curl, models = values
        assert urls == ["http://churn-ab.models.example.com/", "http://models.example.com/pipelines/churn-ab/"]
        assert curl == (
            "curl -sS http://churn-ab.models.example.com/ -H 'Content-Type: application/json' "
            """-d '{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[0.5]}]}'"""
        )
        assert models == ["churn", "iris"]

    return pulumi.Output.all(pipeline.urls, pipeline.curl, pipeline.models).apply(check)


def test_children_are_typed_resources_parented_to_the_component(pulumi_mocks: RenderResult) -> None:
    @pulumi.runtime.test
    def build() -> pulumi.Output[str]:
        return Pipeline("detect-classify", args(PIPELINES[0])).urn

    build()

    component = next(r for r in pulumi_mocks.registrations if r.type == TYPE)
    children = sorted((r.type, r.name) for r in pulumi_mocks.registrations if r.parent == component.urn)
    name = "detect-classify"
    assert children == sorted(
        [
            ("kubernetes:core/v1:ServiceAccount", name),
            ("kubernetes:apps/v1:Deployment", name),
            ("kubernetes:core/v1:Service", name),
            ("kubernetes:autoscaling/v2:HorizontalPodAutoscaler", name),
            ("kubernetes:policy/v1:PodDisruptionBudget", name),
            ("kubernetes:networking.istio.io/v1:DestinationRule", name),
            ("kubernetes:networking.istio.io/v1:VirtualService", name),
            ("kubernetes:security.istio.io/v1:RequestAuthentication", f"{name}-jwt"),
            ("kubernetes:security.istio.io/v1:AuthorizationPolicy", f"{name}-gateway"),
            ("kubernetes:networking.istio.io/v1alpha3:EnvoyFilter", f"{name}-rate-limit"),
            ("kubernetes:security.istio.io/v1:AuthorizationPolicy", f"{name}-access"),
            ("kubernetes:networking.k8s.io/v1:NetworkPolicy", name),
        ]
    )
    assert len(pulumi_mocks.registrations) == 1 + len(children)
