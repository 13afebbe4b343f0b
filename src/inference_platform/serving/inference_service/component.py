"""The InferenceService component: one model, all of its versions, and the routes to them."""

# No `from __future__ import annotations`: the component package (provider/) reads these
# annotations as types at run time.
import pulumi

from inference_platform import pins
from inference_platform.kube import register
from inference_platform.platform.helm import chart
from inference_platform.serving.curl import curl_line
from inference_platform.serving.inference_pool import chart_values, harden_picker
from inference_platform.serving.inference_service.args import InferenceServiceArgs
from inference_platform.serving.inference_service.manifests import model_manifests
from inference_platform.serving.inference_service.routing import pool_name, serves_by_path, serving_selector

MODEL_OUTPUT = "model"
GPU_NODES_OUTPUT = "gpuNodes"
# Only an Ascend model's InferenceService has it, so a GPU stack's outputs are what they were.
NPU_NODES_OUTPUT = "npuNodes"


class InferenceService(pulumi.ComponentResource):
    """A Deployment and Service per version, a model Service, a DestinationRule and a VirtualService."""

    TYPE = "inference-platform:serving:InferenceService"

    urls: pulumi.Output[list[str]]
    curl: pulumi.Output[str]
    weights: pulumi.Output[dict[str, int]]
    mirrors: pulumi.Output[dict[str, float]]
    adapters: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: InferenceServiceArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        # A component's depends_on does not reach its children's registrations: pass it on, so
        # Istio objects wait for istiod (its validating webhook fails closed until it runs).
        child = pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None)
        for manifest in model_manifests(args):
            register(manifest, child)
        model = args.model
        engine = model.picker_engine
        if model.routed_by_pool and engine is not None:
            # Each version's InferencePool and its endpoint picker, from the pinned chart.
            pickers = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(transforms=[harden_picker]))
            for version in model.versions:
                values = chart_values(model.inference_pool, engine, serving_selector(args, version), model.http_port)
                chart(pool_name(args, version), pins.INFERENCE_POOL, args.namespace, values, pickers)

        example = args.model.example_request()
        host_url = f"{args.url_scheme}://{args.host}/"
        path_url = f"{args.url_scheme}://{args.shared_host}{args.path_prefix}"
        self.urls = pulumi.Output.from_input([host_url, path_url] if serves_by_path(args) else [host_url])
        self.curl = pulumi.Output.from_input(curl_line(host_url + example.path.lstrip("/"), example.body))
        self.weights = pulumi.Output.from_input(args.model.live_weights)
        self.mirrors = pulumi.Output.from_input(args.model.mirrors)
        # The LoRA adapters the live versions serve: a ready-to-run curl line each (only a model with
        # adapters registers them, so other models' outputs stay as they were).
        adapters = {}
        for adapter in args.model.served_adapters:
            request = args.model.adapter_request(adapter)
            adapters[adapter] = curl_line(host_url + request.path.lstrip("/"), request.body)
        self.adapters = pulumi.Output.from_input(adapters)
        # Beside what a user reads, what the model holds, as written (the settings it was given): the
        # offline render's summary and GPU plan read them from every InferenceService a program
        # registers (cli/registered.py), whatever composed it.
        self.register_outputs(
            {
                "urls": self.urls,
                "curl": self.curl,
                "weights": self.weights,
                "mirrors": self.mirrors,
            }
            | ({"adapters": self.adapters} if adapters else {})
            | {
                MODEL_OUTPUT: args.model.model_dump(mode="json", by_alias=True, exclude_unset=True),
                GPU_NODES_OUTPUT: args.gpu_nodes.model_dump(mode="json", by_alias=True, exclude_unset=True),
            }
            | (
                {NPU_NODES_OUTPUT: args.npu_nodes.model_dump(mode="json", by_alias=True, exclude_unset=True)}
                if args.model.npu is not None
                else {}
            )
        )
