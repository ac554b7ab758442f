"""A small Prometheus HTTP API client (`/api/v1/query`, `/api/v1/query_range`) for the report.

Credentials and TLS are those of Prometheus' own clients (promtool, Grafana's data source, a
scrape config): basic auth with a password or a password file, a bearer token file, a CA file, a
client certificate and key, and skipping verification; proxies and ~/.netrc from the environment.
Every request goes through the exporter's one HTTP client (`http_get.get_body`, on the shared event loop,
waited for here): a deadline over headers and body, a byte cap, redirects only to the same
origin, credentials never in a URL or a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from exporter.settings import ScrapeAuth
from exporter.sources.base import SourceError
from exporter.sources.http_fetch import HttpClient, TlsOptions, redact
from exporter.sources.http_get import ACCEPT_JSON, get_body
from exporter.sources.scrape_auth import authorizer


class PrometheusError(RuntimeError):
    """Prometheus could not be asked, or refused the query; one line, no credentials."""


@dataclass(frozen=True)
class PrometheusOptions:
    url: str
    auth: ScrapeAuth = field(default_factory=ScrapeAuth)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False
    timeout_seconds: float = 30.0
    #: per response; a report's largest (every engine of a day at the plot step) is a few MiB
    max_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class Series:
    labels: dict[str, str]
    points: list[tuple[float, float]]  # (unix seconds, value); NaN kept, the caller decides


class PrometheusClient:
    def __init__(self, options: PrometheusOptions) -> None:
        self.options = options
        self.base = options.url.rstrip("/")
        self.shown = redact(self.base)
        tls = TlsOptions(options.ca_file, options.cert_file, options.key_file, options.insecure_skip_verify)
        self._client = HttpClient(auth=authorizer(options.auth), tls=tls)

    def close(self) -> None:
        self._client.close()

    def query(self, expr: str, at: float) -> list[Series]:
        return self._get("/api/v1/query", {"query": expr, "time": _ts(at)})

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        params = {"query": expr, "start": _ts(start), "end": _ts(end), "step": _ts(step)}
        return self._get("/api/v1/query_range", params)

    def _get(self, path: str, params: dict[str, str]) -> list[Series]:
        try:
            o = self.options
            raw = get_body(
                self._client,
                self.base + path,
                o.timeout_seconds,
                max_bytes=o.max_bytes,
                accept=ACCEPT_JSON,
                params=params,
            )
        except SourceError as exc:
            raise PrometheusError(f"Prometheus at {self.shown}: {str(exc).split(': ', 1)[-1]}") from None
        try:
            document = json.loads(raw)
            data = document["data"]
            kind, result = data["resultType"], data["result"]
        except (ValueError, KeyError, TypeError):
            raise PrometheusError(f"Prometheus at {self.shown}: the answer is not a Prometheus API document") from None
        if kind == "matrix":
            return [Series(item["metric"], [(float(t), float(v)) for t, v in item["values"]]) for item in result]
        if kind == "vector":
            return [Series(item["metric"], [(float(item["value"][0]), float(item["value"][1]))]) for item in result]
        return []


def _ts(seconds: float) -> str:
    return f"{seconds:.3f}"
