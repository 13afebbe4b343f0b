"""Instant queries through Prometheus' HTTP API: the client `infra analyze` asks its figures of."""

from __future__ import annotations

import math
import os
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import requests

TOKEN_ENV = "PROMETHEUS_TOKEN"
"""Sent as a bearer token when set."""
QUERY_TIMEOUT_SECONDS = 30
Series = tuple[str, str, str]
"""A version's series, as a fleet's query splits them: its namespace, model and version."""


class PrometheusError(Exception):
    """Prometheus cannot be reached, or answered something that is not a query result."""


class Prometheus:
    """Instant queries through Prometheus' HTTP API, at one time, over one kept-alive connection.

    Queries are POSTed, form-encoded: a fleet's query names every model, too long for some
    proxies' limits on a URL."""

    def __init__(self, url: str, at: datetime) -> None:
        self.url = url.rstrip("/")
        self.at = at
        # Imported here: `python -m infra --help` shows TOKEN_ENV without loading requests.
        import requests  # noqa: PLC0415

        self.session: requests.Session = requests.Session()
        token = os.environ.get(TOKEN_ENV)
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(self, *_: object) -> None:
        self.session.close()

    def by_series(self, expression: str, labels: tuple[str, str, str]) -> dict[Series, float]:
        """The query's value per series, keyed by the values of `labels` (NaN and infinities left out)."""
        import requests  # noqa: PLC0415 (imported by __init__ already: see there)

        try:
            response = self.session.post(
                f"{self.url}/api/v1/query",
                data={"query": expression, "time": f"{self.at.timestamp():.3f}"},
                timeout=QUERY_TIMEOUT_SECONDS,
            )
        except requests.RequestException as error:
            raise PrometheusError(f"cannot reach Prometheus at {self.url}: {type(error).__name__}") from None
        try:
            body = response.json()
            if response.status_code != 200 or body.get("status") != "success":
                message = body.get("error") or f"HTTP {response.status_code}"
                raise PrometheusError(f"Prometheus at {self.url} refused a query: {message}")
            values = {}
            for item in body["data"]["result"]:
                value = float(item["value"][1])
                if math.isfinite(value):
                    metric = item["metric"]
                    values[metric.get(labels[0], ""), metric.get(labels[1], ""), metric.get(labels[2], "")] = value
        except (ValueError, KeyError, TypeError, AttributeError, IndexError):
            raise PrometheusError(f"Prometheus at {self.url} answered something that is not a query result") from None
        return values
