"""The Pipeline component: KServe's router running one graph over the stack's models."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from components.kube import register
from components.pipeline.manifests import PipelineArgs, pipeline_manifests


class Pipeline(pulumi.ComponentResource):
    """A router Deployment and Service, its routes, protection and access to the models it calls."""

    urls: pulumi.Output[list[str]]
    curl: pulumi.Output[str]
    models: pulumi.Output[list[str]]

    def __init__(
        self,
        name: str,
        args: PipelineArgs,
        example_body: dict[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("inference-platform:serving:Pipeline", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=opts.depends_on if opts else None)
        for manifest in pipeline_manifests(args):
            register(manifest, child)

        host_url = f"{args.url_scheme}://{args.host}/"
        path_url = f"{args.url_scheme}://{args.domain}{args.path_prefix}"
        body = json.dumps(example_body or {}, separators=(",", ":"))
        self.urls = pulumi.Output.from_input([host_url, path_url])
        self.curl = pulumi.Output.from_input(f"curl -sS {host_url} -H 'Content-Type: application/json' -d '{body}'")
        self.models = pulumi.Output.from_input(args.pipeline.models)
        self.register_outputs({"urls": self.urls, "curl": self.curl, "models": self.models})
