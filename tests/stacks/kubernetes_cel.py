"""The part of Kubernetes' own CEL library that the rendered CRDs' rules call, for cel-python.

The API server evaluates x-kubernetes-validations with CEL's standard functions plus libraries of
its own (k8s.io/apiserver/pkg/cel/library). cel-python has the standard ones; this adds the URL
library (urls.go) with Go's net/url semantics, because Istio's RequestAuthentication checks
`url(self).getScheme()` on every jwksUri. A rule calling any other Kubernetes function fails to
evaluate and the CEL check reports it, so a chart bump that needs more is seen, not skipped.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from celpy import celtypes
from celpy.evaluation import CELEvalError


class URL(celtypes.StringType):
    """A value of Kubernetes' CEL type `URL`: the string it was made from."""


def _request_uri(text: str) -> bool:
    """Go's url.ParseRequestURI: an absolute URI (with a scheme) or an absolute path."""
    if not text or any(ch in text for ch in " \t\r\n"):
        return False
    parts = urlsplit(text)
    return bool(parts.scheme) or text.startswith("/")


def url(value: celtypes.StringType) -> URL | CELEvalError:
    if not _request_uri(str(value)):
        return CELEvalError(f"URL parse error during conversion from string: {value!r}")
    return URL(value)


def is_url(value: celtypes.StringType) -> celtypes.BoolType:
    return celtypes.BoolType(_request_uri(str(value)))


def _host(value: URL) -> str:
    netloc = urlsplit(str(value)).netloc
    return netloc.rpartition("@")[2]


def _hostname_and_port(value: URL) -> tuple[str, str]:
    """Go's URL.Hostname() and URL.Port(): brackets off an IPv6 literal, the port after the last colon."""
    host = _host(value)
    if host.startswith("["):
        literal, _, rest = host[1:].partition("]")
        return literal, rest[1:] if rest.startswith(":") else ""
    name, colon, port = host.rpartition(":")
    return (name, port) if colon else (host, "")


def get_scheme(value: URL) -> celtypes.StringType:
    return celtypes.StringType(urlsplit(str(value)).scheme.lower())


def get_host(value: URL) -> celtypes.StringType:
    return celtypes.StringType(_host(value))


def get_hostname(value: URL) -> celtypes.StringType:
    return celtypes.StringType(_hostname_and_port(value)[0])


def get_port(value: URL) -> celtypes.StringType:
    return celtypes.StringType(_hostname_and_port(value)[1])


def get_escaped_path(value: URL) -> celtypes.StringType:
    return celtypes.StringType(urlsplit(str(value)).path)


FUNCTIONS: dict[str, Any] = {
    "url": url,
    "isURL": is_url,
    "getScheme": get_scheme,
    "getHost": get_host,
    "getHostname": get_hostname,
    "getPort": get_port,
    "getEscapedPath": get_escaped_path,
}
