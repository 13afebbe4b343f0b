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
    picker_policies,
    service_account,
    wake_policies,
)
from inference_platform.serving.autoscaling import horizontal_pod_autoscaler
from inference_platform.serving.inference_pool import PICKER_POD_LABEL, picker_name
from inference_platform.serving.inference_service.args import (
    InferenceServiceArgs,
    object_labels,
    object_metadata,
    selector_labels,
    version_fqdn,
    version_name,
)
from inference_platform.serving.inference_service.groups import group_policies, leader_worker_set, scale_target
from inference_platform.serving.inference_service.pods import (
    config_map,
    deployment,
    disruption_budget,
    rollout_timeout_seconds,
)
from inference_platform.serving.inference_service.routing import (
    destination_rule,
    http_routes,
    mesh_virtual_service,
    model_service,
    pool_name,
    serving_selector,
    version_service,
    virtual_service,
)
from inference_platform.serving.model_cache_volumes import persistent_volume, persistent_volume_claim, volume_name
from inference_platform.serving.model_spec import ModelVersion
from inference_platform.serving.model_storage import download_port, is_downloaded
from inference_platform.serving.payload_capture import (
    capture_egress_policy,
    capture_filter,
    captured_versions,
    ext_proc,
)
from inference_platform.serving.protection import gateway_policies, rate_limit_filter
from inference_platform.serving.scaled_object import interceptor_trigger, mirror_trigger, scaled_object, target_triggers
from inference_platform.serving.server_plan import ServerPlan
from inference_platform.serving.waking import interceptor_route


def download_policy(args: InferenceServiceArgs, version: ModelVersion) -> dict[str, Any] | None:
    """The way out for a version whose storage initializers fetch files (the model's, its adapters')
    from outside the cluster: its own policy, on the ports those downloads use, so adding or retiring
    a version leaves the model's policy alone. A cached version downloads nothing: the cache agent does."""
    if version.name in args.cached:
        return None
    uris = [version.model_uri, *(adapter.uri for adapter in version.adapters)]
    ports = sorted({download_port(uri, args.storage) for uri in uris if is_downloaded(uri)})
    if not ports:
        return None
    return internet_egress_policy(
        object_metadata(args, f"{version_name(args, version)}-download", version),
        selector_labels(args, version),
        ports,
    )


def autoscaler(args: InferenceServiceArgs, version: ModelVersion, pod: dict[str, Any]) -> dict[str, Any]:
    """The version's HPA, or with KEDA its ScaledObject (and what wakes it when it sleeps at zero)."""
    spec, metadata = (
        args.model.version_autoscaling(version),
        object_metadata(args, version_name(args, version), version),
    )
    target = scale_target(args, version)
    if args.keda is None:
        return horizontal_pod_autoscaler(metadata, spec, target)
    pods, model = selector_labels(args, version), args.model
    triggers = target_triggers(
        spec, args.keda, args.namespace, pods, queue_series=model.queue_metric, ttft_histogram=model.ttft_histogram
    )
    if spec.scales_to_zero and version.is_live:
        triggers.append(interceptor_trigger(args.keda, metadata["name"]))
    elif spec.scales_to_zero:
        live = [v.name for v in args.model.versions if v.is_live]
        triggers.append(mirror_trigger(args.keda, args.namespace, args.model.name, live))
    return scaled_object(metadata, spec, triggers, target, initial_cooldown_seconds=rollout_timeout_seconds(args, pod))


def waking_manifests(args: InferenceServiceArgs, version: ModelVersion) -> list[dict[str, Any]]:
    """For a live version of a model that sleeps at zero: the interceptor's route to it, and its way in."""
    add_on = args.wakes_through
    if add_on is None or not version.is_live:
        return []
    name = version_name(args, version)
    port = args.model.http_port
    route = interceptor_route(
        object_metadata(args, name, version),
        version_fqdn(args, version),
        port,
        args.model.version_autoscaling(version),
        args.model.timeout,
    )
    return [
        route,
        *wake_policies(add_on, selector_labels(args, version), port, object_metadata(args, f"{name}-wake", version)),
    ]


def capture_manifests(args: InferenceServiceArgs, version: ModelVersion) -> list[dict[str, Any]]:
    """For the primary and each shadow of a model that compares payloads: the capture filter on its
    pods' inbound HTTP port, and their way out to the comparator."""
    comparator = args.comparator
    if comparator is None or version not in captured_versions(args.model):
        return []
    name, selector = f"{version_name(args, version)}-capture", selector_labels(args, version)
    config = ext_proc(comparator, args.namespace, args.model.name, version.name)
    return [
        capture_filter(object_metadata(args, name, version), selector, args.model.http_port, config),
        capture_egress_policy(object_metadata(args, name, version), selector, comparator),
    ]


def picker_manifests(args: InferenceServiceArgs, version: ModelVersion) -> list[dict[str, Any]]:
    """For a version routed through its inference pool: the picker's and the pool's network policies."""
    if not args.model.routed_by_pool:
        return []
    picker = picker_name(pool_name(args, version))
    return picker_policies(
        {PICKER_POD_LABEL: picker},
        serving_selector(args, version),
        (args.gateway.namespace, args.gateway.selector),
        args.network.api_server,
        (object_metadata(args, picker, version), object_metadata(args, f"{pool_name(args, version)}-picker", version)),
    )


def protection_manifests(args: InferenceServiceArgs, plan: ServerPlan) -> list[dict[str, Any]]:
    """Rate limit, gateway access rules, in-mesh access and network policy of the model."""
    model, protection = args.model, args.model.protection
    serving = model.serving_ports
    # A server with metrics on its serving port would publish them through the gateway.
    metrics = plan.metrics
    private_paths = [metrics.path, f"{metrics.path}/*"] if metrics is not None and metrics.port in serving else []
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
        metrics_ports=(metrics.port,) if metrics is not None else (),
        scraper=args.metrics_scraper,
        callers=args.callers,
        callees=args.callees,
        gateway_ports=(model.http_port,),
    )
    objects.append(authorization_policy(access, object_metadata(args, f"{model.name}-access")))
    objects.append(network_policy(access, object_metadata(args, model.name)))
    return objects


def cache_manifests(args: InferenceServiceArgs, version: ModelVersion) -> list[dict[str, Any]]:
    """For a cached version: its PersistentVolume over its directory on the cache nodes, and its claim."""
    cached = args.cached.get(version.name)
    if cached is None or args.model_cache is None:
        return []
    labels = object_labels(args, version)
    volume = persistent_volume(cached, args.namespace, args.model_cache.path, args.cache_node_selector, labels)
    claim = persistent_volume_claim(cached, args.namespace, volume_name(args.namespace, cached), labels)
    return [volume, claim]


def model_manifests(args: InferenceServiceArgs) -> list[dict[str, Any]]:
    """Every object of the model, versions first, in a stable order."""
    objects: list[dict[str, Any]] = [service_account(object_metadata(args, args.service_account))]
    plans = [(version, args.model.plan(version, args.gpu_nodes)) for version in args.model.versions]
    for version, plan in plans:
        if plan.config_files:
            objects.append(config_map(args, version, plan))
        objects += cache_manifests(args, version)
        workload = deployment(args, version, plan)
        pod = workload["spec"]["template"]["spec"]
        if plan.workers is not None:
            workload = leader_worker_set(args, version, workload, plan.workers)
            pod = workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
        objects.append(workload)
        objects.append(version_service(args, version, pod))
        if args.model.version_autoscaling(version).enabled:
            objects.append(autoscaler(args, version, pod))
        objects += waking_manifests(args, version)
        objects += capture_manifests(args, version)
        budget = disruption_budget(args, version)
        if budget is not None:
            objects.append(budget)
        download = download_policy(args, version)
        if download is not None:
            objects.append(download)
        if plan.workers is not None:
            objects += group_policies(args, version)
        objects += picker_manifests(args, version)
    objects += [model_service(args), destination_rule(args)]
    objects += http_routes(args) if args.model.routed_by_pool else [virtual_service(args)]
    objects.append(mesh_virtual_service(args))
    objects += protection_manifests(args, plans[-1][1])
    return objects
