"""Checks of rendered objects against their owners' schemas, not ours.

Kubernetes kinds: the API's own OpenAPI schemas via kubernetes-validate, strict (unknown fields
fail). LeaderWorkerSets: the CRD the pinned lws chart ships, made strict as the API server applies
it. The Gateway API's and the inference extension's kinds: their pinned CRD files, strict, with their
CEL rules. Istio kinds: the pydantic types generated from Istio's CRDs (cloudcoil). Those ignore
unknown fields, so an object must also survive a round trip unchanged: a misspelt key, dropped
by the model, then shows up as a difference.
"""

from __future__ import annotations

import functools
import json
import tarfile
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from cloudcoil.models.istio.networking import v1 as istio_networking
from cloudcoil.models.istio.networking import v1alpha3 as istio_networking_v1alpha3
from cloudcoil.models.istio.security import v1 as istio_security
from kubernetes_validate import utils as kubernetes_validate_utils

from inference_platform import pins
from tests.conftest import MANIFEST_PINS, charts_dir, manifests_dir
from tests.stacks.cluster_checks import cel_schema_problems, crd_schema_validators

KUBERNETES_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())

# kubernetes-validate reads and parses each schema file (the shared definitions run to megabytes)
# on every call. The files never change: read each once. Validation itself is untouched.
kubernetes_validate_utils.schema_contents = functools.lru_cache(maxsize=None)(kubernetes_validate_utils.schema_contents)

ISTIO_TYPES: dict[tuple[str, str], Any] = {
    ("networking.istio.io/v1", "VirtualService"): istio_networking.VirtualService,
    ("networking.istio.io/v1", "DestinationRule"): istio_networking.DestinationRule,
    ("networking.istio.io/v1", "Gateway"): istio_networking.Gateway,
    ("networking.istio.io/v1alpha3", "EnvoyFilter"): istio_networking_v1alpha3.EnvoyFilter,
    ("security.istio.io/v1", "AuthorizationPolicy"): istio_security.AuthorizationPolicy,
    ("security.istio.io/v1", "PeerAuthentication"): istio_security.PeerAuthentication,
    ("security.istio.io/v1", "RequestAuthentication"): istio_security.RequestAuthentication,
}


class IstioSchemaError(ValueError):
    """Istio's generated type refuses the object, or changes it on a round trip."""


def is_istio(manifest: dict[str, Any]) -> bool:
    return str(manifest["apiVersion"]).split("/")[0].endswith(".istio.io")


def validate_kubernetes(manifest: dict[str, Any]) -> None:
    """Raise kubernetes_validate.ValidationError unless every supported Kubernetes version accepts it."""
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(manifest, version, strict=True)


def validate_istio(manifest: dict[str, Any]) -> None:
    """Raise unless Istio's generated type accepts the object exactly as written."""
    model = ISTIO_TYPES[(manifest["apiVersion"], manifest["kind"])]
    try:
        parsed = model.model_validate(manifest)
    except ValueError as error:  # pydantic's ValidationError
        raise IstioSchemaError(str(error)) from error
    round_trip = parsed.model_dump(by_alias=True, exclude_unset=True, mode="json")
    if round_trip != manifest:
        raise IstioSchemaError(f"{manifest['kind']} has fields Istio does not know, or values it coerces")


LWS_CRD = "lws/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"


@functools.cache
def lws_validator() -> jsonschema.Draft7Validator:
    """LeaderWorkerSet's schema from the pinned chart's tarball (skips, saying why, without it)."""
    with tarfile.open(charts_dir() / f"{pins.LWS.chart}-{pins.LWS.version}.tgz") as archive:
        member = archive.extractfile(LWS_CRD)
        assert member is not None
        crd = yaml.safe_load(member)
    return crd_schema_validators(json.dumps([crd]))[("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")]


def validate_lws(manifest: dict[str, Any]) -> None:
    errors = [
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in lws_validator().iter_errors(manifest)
    ]
    if errors:
        raise jsonschema.ValidationError("; ".join(errors))


# The Gateway API's and the inference extension's kinds: the pinned CRD files the platform applies.
CRD_FILE_GROUPS = ("gateway.networking.k8s.io", "inference.networking.k8s.io")


@functools.cache
def _crd_files() -> str:
    crds = [
        document
        for pin in MANIFEST_PINS
        for document in yaml.load_all((manifests_dir() / pin.file).read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
        if document and document.get("kind") == "CustomResourceDefinition"
    ]
    return json.dumps(crds, sort_keys=True)


def validate_crd_file_kind(manifest: dict[str, Any]) -> None:
    """Raise unless the pinned CRD accepts the object strictly and its CEL rules hold (cel-python)."""
    key = (manifest["apiVersion"], manifest["kind"])
    validator = crd_schema_validators(_crd_files())[key]
    errors = [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(manifest)]
    errors += cel_schema_problems(_crd_files(), manifest)
    if errors:
        raise jsonschema.ValidationError("; ".join(errors))


_VALID: set[str] = set()


def validate(manifest: dict[str, Any]) -> None:
    """Raise unless the object's owner accepts it. An object already accepted is not checked again."""
    key = json.dumps(manifest, sort_keys=True)
    if key in _VALID:
        return
    if is_istio(manifest):
        validate_istio(manifest)
    elif manifest["apiVersion"] == "leaderworkerset.x-k8s.io/v1":
        validate_lws(manifest)
    elif str(manifest["apiVersion"]).split("/")[0] in CRD_FILE_GROUPS:
        validate_crd_file_kind(manifest)
    else:
        validate_kubernetes(manifest)
    _VALID.add(key)
