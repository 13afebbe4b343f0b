"""Grafana (grafana-community's chart): the platform Prometheus as its datasource, and a dashboard per
model comparing its versions (analysis/dashboards.py), provisioned from files, not clicked."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pulumi
from pydantic import Field

from inference_platform import pins
from inference_platform.config.base import ConfigModel, DNS1123Label, DNSSubdomain
from inference_platform.config.secrets import SECRET
from inference_platform.kube import register
from inference_platform.platform import pod_security
from inference_platform.platform.helm import chart, dependencies, merge_values, own_namespace

RELEASE = "grafana"
POD_LABELS = {"app.kubernetes.io/name": "grafana", "app.kubernetes.io/instance": RELEASE}
LISTEN_PORT = 3000
SERVICE_PORT = 80
ADMIN_USER = "admin"
ADMIN_SECRET = "grafana-admin"
PROVIDER = "inference-platform"
HOST_PREFIX = "grafana"
# The platform Prometheus as Grafana knows it: the dashboards' panels name it (analysis/dashboards.py).
DATASOURCE_UID = "inference-prometheus"
# Dashboards that shards write as ConfigMaps (an environment of several stacks), labelled so in
# Grafana's namespace: the chart's own sidecar gathers them into the provider's folder.
DASHBOARDS_LABEL = "grafana_dashboard"
DASHBOARDS_LABEL_VALUE = "inference-platform"


class GrafanaConfig(ConfigModel):
    enabled: bool = Field(default=False, description="Dashboards comparing each model's versions.")
    namespace: DNS1123Label = Field(default="monitoring", description="Grafana's namespace.")
    admin_password: Annotated[str | None, SECRET] = Field(
        default=None,
        description="Required when enabled; a Pulumi secret (`pulumi config set --secret --path "
        "'platform.grafana.adminPassword'`). Never left to the chart, which would invent a new one on every render.",
    )
    expose: bool = Field(default=False, description="Serve Grafana through the gateway at grafana.<domain>.")
    values: dict[str, Any] = Field(default_factory=dict, description="Raw chart values laid over the generated ones.")


class GrafanaArgs(ConfigModel):
    config: GrafanaConfig
    prometheus_url: str = Field(description="The platform Prometheus' in-cluster URL with its port.")
    dashboards: dict[str, dict[str, Any]] = Field(
        description="Grafana dashboard JSON models by name (the file name less .json)."
    )
    domain: DNSSubdomain
    create_namespace: bool = Field(description="False when Prometheus' namespace, which exists already.")
    gateway: str | None = Field(default=None, description="<namespace>/<name> of the shared Gateway, when exposed.")
    url_scheme: str = "http"
    dashboards_from_config_maps: bool = Field(
        default=False,
        description="Also load the dashboards other stacks write as ConfigMaps labelled DASHBOARDS_LABEL in "
        "Grafana's namespace (an environment's shards), through the chart's sidecar.",
    )


def dashboard_json(document: dict[str, Any]) -> str:
    """What the chart writes into the dashboards ConfigMap: stable, sorted JSON text."""
    return json.dumps(document, sort_keys=True, indent=2)


def grafana_values(args: GrafanaArgs) -> dict[str, Any]:
    """The chart's values. The admin credentials come from our own Secret: a secret value in the
    values would make Pulumi treat (and mask) all of them as one secret."""
    folder = f"/var/lib/grafana/dashboards/{PROVIDER}"
    return {
        "admin": {"existingSecret": ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        # The chart runs its dashboard download step whenever dashboards are listed (ours are inline).
        "downloadDashboards": {
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}}
        },
        # Provisioned from files: Grafana never talks to the Kubernetes API, so it has no RBAC
        # (the chart's ClusterRole would have `rules: []`, which the API server stores as no rules
        # at all: every `pulumi up` would then put them back, as the rehearsal found).
        "automountServiceAccountToken": False,
        "rbac": {"create": False},
        "datasources": {
            "datasources.yaml": {
                "apiVersion": 1,
                "datasources": [
                    {
                        "name": "Prometheus",
                        "type": "prometheus",
                        "uid": DATASOURCE_UID,
                        "url": args.prometheus_url,
                        "access": "proxy",
                        "isDefault": True,
                        "editable": False,
                    }
                ],
            }
        },
        "dashboardProviders": {
            "dashboardproviders.yaml": {
                "apiVersion": 1,
                "providers": [
                    {
                        "name": PROVIDER,
                        "orgId": 1,
                        "folder": "Inference",
                        "type": "file",
                        "disableDeletion": True,
                        "editable": False,
                        "options": {"path": folder},
                    }
                ],
            }
        },
        "dashboards": {
            PROVIDER: {name: {"json": dashboard_json(document)} for name, document in sorted(args.dashboards.items())}
        },
        "grafana.ini": {"server": {"root_url": f"{args.url_scheme}://{HOST_PREFIX}.{args.domain}/"}},
    }


def dashboards_sidecar(args: GrafanaArgs) -> dict[str, Any]:
    """The chart's dashboards sidecar, gathering labelled ConfigMaps of Grafana's namespace into the
    provider's folder; it watches them through the API (the chart's Role lets it)."""
    return {
        "automountServiceAccountToken": True,
        "rbac": {"create": True},
        "sidecar": {
            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"cpu": "100m", "memory": "128Mi"}},
            "dashboards": {
                "enabled": True,
                "label": DASHBOARDS_LABEL,
                "labelValue": DASHBOARDS_LABEL_VALUE,
                "searchNamespace": args.config.namespace,
                "folder": f"/var/lib/grafana/dashboards/{PROVIDER}-shards",
                "provider": {"name": f"{PROVIDER}-shards", "folder": "Inference", "allowUiUpdates": False},
            },
        },
    }


def virtual_service(args: GrafanaArgs) -> dict[str, Any]:
    """grafana.<domain> on the shared Gateway, to the chart's Service."""
    namespace = args.config.namespace
    return {
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {"name": RELEASE, "namespace": namespace},
        "spec": {
            "hosts": [f"{HOST_PREFIX}.{args.domain}"],
            "gateways": [args.gateway],
            "http": [
                {
                    "route": [
                        {
                            "destination": {
                                "host": f"{RELEASE}.{namespace}.svc.cluster.local",
                                "port": {"number": SERVICE_PORT},
                            }
                        }
                    ]
                }
            ],
        },
    }


class Grafana(pulumi.ComponentResource):
    url: pulumi.Output[str]

    def __init__(self, name: str, args: GrafanaArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        """`opts.depends_on`: what Grafana's objects wait for too (Prometheus' namespace; istiod,
        whose webhook checks the VirtualService)."""
        super().__init__("inference-platform:platform:Grafana", name, None, opts)
        config = args.config
        if config.admin_password is None:
            raise ValueError("platform.grafana.adminPassword is required (the stack config checks this first)")
        values = grafana_values(args)
        if args.dashboards_from_config_maps:
            values = merge_values(values, dashboards_sidecar(args))
        values = merge_values(values, config.values)
        after = dependencies(opts)
        waits = [*after, *own_namespace(config.namespace, self, pod_security.BASELINE, create=args.create_namespace)]
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": ADMIN_SECRET, "namespace": config.namespace},
            "type": "Opaque",
            "stringData": {"admin-user": ADMIN_USER, "admin-password": pulumi.Output.secret(config.admin_password)},
        }
        waits.append(register(secret, pulumi.ResourceOptions(parent=self, depends_on=list(waits))))
        release = chart(
            RELEASE, pins.GRAFANA, config.namespace, values, pulumi.ResourceOptions(parent=self, depends_on=waits)
        )
        if config.expose and args.gateway is not None:
            register(virtual_service(args), pulumi.ResourceOptions(parent=self, depends_on=[release, *after]))
            self.url = pulumi.Output.from_input(f"{args.url_scheme}://{HOST_PREFIX}.{args.domain}/")
        else:
            self.url = pulumi.Output.from_input(f"http://{RELEASE}.{config.namespace}.svc:{SERVICE_PORT}")
        self.register_outputs({"url": self.url})
