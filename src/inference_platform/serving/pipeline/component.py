"""The Pipeline component: KServe's router running one graph over the stack's models."""

# No `from __future__ import annotations`: the component package (provider/) reads these
# annotations as types at run time.
import pulumi

from inference_platform.kube import register
from inference_platform.serving.curl import curl_line
from inference_platform.serving.pipeline.manifests import PipelineArgs, pipeline_manifests


class Pipeline(pulumi.ComponentResource):
    """A router Deployment and Service, its routes, protection and access to the models it calls."""

    TYPE = "inference-platform:serving:Pipeline"

    urls: pulumi.Output[list[str]]
    curl: pulumi.Output[str]
    models: pulumi.Output[list[str]]

    def __init__(self, name: str, args: PipelineArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(self.TYPE, name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None)
        for manifest in pipeline_manifests(args):
            register(manifest, child)

        host_url = f"{args.url_scheme}://{args.host}/"
        path_url = f"{args.url_scheme}://{args.domain}{args.path_prefix}"
        self.urls = pulumi.Output.from_input([host_url, path_url])
        self.curl = pulumi.Output.from_input(curl_line(host_url, args.example_body or {}))
        self.models = pulumi.Output.from_input(args.pipeline.models)
        self.register_outputs({"urls": self.urls, "curl": self.curl, "models": self.models})
