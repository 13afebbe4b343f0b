"""Every object of one model, assembled from its pods (pods.py), routes (routing.py), access
rules (access.py) and protection (protection.py)."""

from __future__ import annotations

from typing import Any

from inference_platform.platform.ingress_gateway import GATEWAY_RELEASE
from inference_platform.serving.access import (
    Access,
    authorization_policy,
    internet_egress_policy,
    network_policy,
    service_account,
)
from inference_platform.serving.autoscaling import horizontal_pod_autoscaler
from inference_platform.serving.inference_service.args import (
    InferenceServiceArgs,
    object_metadata,
    selector_labels,
    version_name,
)
from inference_platform.serving.inference_service.pods import config_map, deployment, disruption_budget
from inference_platform.serving.inference_service.routing import (
    destination_rule,
    mesh_virtual_service,
    model_service,
    version_service,
    virtual_service,
)
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.model_storage import download_port, is_downloaded
from inference_platform.serving.protection import gateway_policies, rate_limit_filter
from inference_platform.serving.server_plan import ServerPlan


def download_policy(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, Any] | None:
    """The way out for a version whose storage initializer fetches model files from outside the
    cluster: its own policy, so adding or retiring a version leaves the model's policy alone."""
    if not is_downloaded(version.model_uri):
        return None
    return internet_egress_policy(
        object_metadata(args, f"{version_name(args, version)}-download", version),
        selector_labels(args, version),
        download_port(version.model_uri, args.storage),
    )


def protection_manifests(args: InferenceServiceArgs, plan: ServerPlan) -> list[dict[str, Any]]:
    """Rate limit, gateway access rules, in-mesh access and network policy of the model."""
    model, protection = args.model, args.model.protection
    serving = model.serving_ports
    # A server with metrics on its serving port would publish them through the gateway.
    private_paths = [plan.metrics_path, f"{plan.metrics_path}/*"] if plan.metrics_port in serving else []
    objects = gateway_policies(
        model.name,
        protection,
        gateway=(args.gateway.namespace, args.gateway.selector),
        hosts=(args.host, args.shared_host, args.path_prefix),
        private_paths=private_paths,
    )
    if protection.rate_limit is not None:
        name = f"{model.name}-rate-limit"
        objects.append(rate_limit_filter(name, args.namespace, selector_labels(args), protection.rate_limit))
    access = Access(
        workload=args.workload(),
        gateway_namespace=args.gateway.namespace,
        gateway_account=GATEWAY_RELEASE,
        metrics_ports=(plan.metrics_port,),
        scraper=args.metrics_scraper,
        callers=args.callers,
        callees=args.callees,
    )
    objects.append(authorization_policy(access, object_metadata(args, f"{model.name}-access")))
    objects.append(network_policy(access, object_metadata(args, model.name)))
    return objects


def model_manifests(args: InferenceServiceArgs) -> list[dict[str, Any]]:
    """Every object of the model, versions first, in a stable order."""
    objects: list[dict[str, Any]] = [service_account(object_metadata(args, args.service_account))]
    plans = [(version, args.model.plan(version, args.gpu_nodes)) for version in args.model.versions]
    for version, plan in plans:
        if plan.config_files:
            objects.append(config_map(args, version, plan))
        workload = deployment(args, version, plan)
        pod = workload["spec"]["template"]["spec"]
        objects.append(workload)
        objects.append(version_service(args, version, pod))
        if args.model.autoscaling.enabled:
            objects.append(
                horizontal_pod_autoscaler(
                    object_metadata(args, version_name(args, version), version), args.model.autoscaling
                )
            )
        budget = disruption_budget(args, version)
        if budget is not None:
            objects.append(budget)
        download = download_policy(args, version)
        if download is not None:
            objects.append(download)
    objects += [model_service(args), destination_rule(args), virtual_service(args), mesh_virtual_service(args)]
    objects += protection_manifests(args, plans[-1][1])
    return objects
