"""The two Kubernetes API calls engine discovery makes: list and watch the pods on one node.

`requests` against the REST API, as client-go's reflector does it: a paged list, then a
streamed watch of one JSON event per line. Each request has one total deadline, connection,
headers and body together (http_fetch's `within` and `Body`, as engine fetches have), headers
bounded in total like an engine's, and no redirect is followed. In a pod the address, CA and token come from the
environment and the mounted service account; the token is re-read for each request, since bound
service-account tokens are rotated by the kubelet.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

import requests

from exporter.settings import KubernetesSettings
from exporter.sources.base import SourceError
from exporter.sources.http_fetch import (
    ERROR_DETAIL_BYTES,
    MAX_HEADER_BYTES,
    NoRedirectSession,
    ResponseBody,
    error_detail,
    headers_too_large,
    within,
)
from exporter.validation import ConfigError

# A watch event is one pod; the API server refuses objects over ~1.5 MB (etcd's request limit).
MAX_EVENT_BYTES = 4 * 1024 * 1024
# A page is held whole and decoded into dicts (several times its size): 100 pods of a few tens of
# KB each is a few MB, and the cap stops an API (or a proxy in front of it) that sends more.
LIST_PAGE_SIZE = 100
MAX_PAGE_BYTES = 32 * 1024 * 1024
# A watch lasts timeoutSeconds; this bounds what it may send in that time (events are bounded each).
MAX_WATCH_BYTES = 1024 * 1024 * 1024
CONNECT_TIMEOUT_SECONDS = 10.0
REQUEST_TIMEOUT_SECONDS = 30.0
# An error status's reason is read this long at most (a watch's own deadline is minutes away).
STATUS_READ_SECONDS = 5.0


class ApiError(Exception):
    """The API could not be read; the message says why (for logs and `source_up`)."""


class ResourceExpired(ApiError):
    """410 Gone: the resourceVersion we watch from is older than the API keeps; list again."""


class KubernetesApi:
    """The two calls discovery needs, with the service account's (re-read, rotating) token."""

    def __init__(self, base_url: str, token_file: str, verify: bool | str) -> None:
        self.base_url = base_url.rstrip("/")
        self._token_file = token_file
        self._session = NoRedirectSession()
        self._session.trust_env = False  # in-cluster traffic: never through an HTTP(S)_PROXY
        self._session.verify = verify
        self._response: requests.Response | None = None

    def list_pods(self, node_name: str) -> tuple[list[dict[str, Any]], str]:
        """All pods on the node and the list's resourceVersion (following `continue` pages)."""
        items: list[dict[str, Any]] = []
        params = {"fieldSelector": f"spec.nodeName={node_name}", "limit": str(LIST_PAGE_SIZE)}
        while True:
            deadline = time.monotonic() + REQUEST_TIMEOUT_SECONDS
            response = self._get(params, deadline)
            try:
                with response:
                    body = json.loads(
                        ResponseBody(response, self.base_url, deadline, REQUEST_TIMEOUT_SECONDS, MAX_PAGE_BYTES).read()
                    )
                if not isinstance(body, dict):
                    raise ValueError(f"a {type(body).__name__}, not an object")
            except SourceError as exc:
                raise ApiError(f"list pods: {exc}") from exc
            except ValueError as exc:
                raise ApiError(f"list pods: response is not JSON ({exc})") from exc
            items.extend(item for item in body.get("items") or [] if isinstance(item, dict))
            metadata = body.get("metadata") or {}
            if not metadata.get("continue"):
                return items, str(metadata.get("resourceVersion", ""))
            params = {**params, "continue": metadata["continue"]}

    def watch_pods(self, node_name: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """Open a watch (errors raise here) and return its events as they arrive."""
        params = {
            "fieldSelector": f"spec.nodeName={node_name}",
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        lifetime = timeout_seconds + REQUEST_TIMEOUT_SECONDS
        deadline = time.monotonic() + lifetime
        response = self._get(params, deadline)
        self._response = response
        return self._events(ResponseBody(response, self.base_url, deadline, lifetime, MAX_WATCH_BYTES))

    def _get(self, params: dict[str, str], deadline: float) -> requests.Response:
        """The response once its headers are in, all before the monotonic `deadline`."""
        headers = {"Accept": "application/json"}
        if self._token_file:
            headers["Authorization"] = f"Bearer {_read_token(self._token_file)}"
        remaining = max(0.001, deadline - time.monotonic())
        try:
            with within(deadline):
                response = self._session.get(
                    f"{self.base_url}/api/v1/pods",
                    params=params,
                    headers=headers,
                    stream=True,
                    timeout=(min(CONNECT_TIMEOUT_SECONDS, remaining), remaining),
                )
        except requests.RequestException as exc:
            if headers_too_large(exc):
                raise ApiError(f"{self.base_url}: response headers over {MAX_HEADER_BYTES} bytes") from exc
            if time.monotonic() >= deadline:  # the watchdog shut the socket
                raise ApiError(f"{self.base_url}: no response within {remaining:g}s") from exc
            raise ApiError(f"{self.base_url}: {exc.__class__.__name__}: {exc}") from exc
        if time.monotonic() >= deadline:  # shut mid-headers: http.client takes the end as theirs
            response.close()
            raise ApiError(f"{self.base_url}: no response within {remaining:g}s")
        if response.status_code == 410:
            response.close()
            raise ResourceExpired("410 Gone")
        if response.status_code != 200:
            # The API's reason (its Status message, or a proxy's text), read within 5 s at most.
            reason_deadline = min(deadline, time.monotonic() + STATUS_READ_SECONDS)
            body = ResponseBody(response, self.base_url, reason_deadline, STATUS_READ_SECONDS, ERROR_DETAIL_BYTES)
            detail = error_detail(body, text_fallback=True) or ": (no readable reason)"
            response.close()
            hint = " (check the ClusterRole grants get/list/watch on pods)" if response.status_code == 403 else ""
            raise ApiError(f"HTTP {response.status_code} from {self.base_url}{detail}{hint}")
        return response

    def _events(self, body: ResponseBody) -> Iterator[dict[str, Any]]:
        """One JSON event per line; the watch ends at its deadline (timeoutSeconds and a margin)
        even if the server keeps it open, and no event may grow past MAX_EVENT_BYTES."""
        buffer = bytearray()
        with body.response:
            try:
                for chunk in body.chunks():
                    buffer += chunk
                    start = 0
                    while (end := buffer.find(b"\n", start)) != -1:
                        line = bytes(buffer[start:end])
                        start = end + 1
                        if line.strip():
                            try:
                                yield json.loads(line)
                            except ValueError as exc:
                                raise ApiError(f"watch event is not JSON ({exc})") from exc
                    del buffer[:start]
                    if len(buffer) > MAX_EVENT_BYTES:
                        raise ApiError(f"watch event over {MAX_EVENT_BYTES} bytes")
            except SourceError as exc:  # a read failed, or close() from another thread
                if exc.reason == "timeout":
                    return  # as if the server had ended it: the caller watches again
                raise ApiError(f"watch interrupted: {exc}") from exc

    def close(self) -> None:
        """Also from another thread: shutting the socket down wakes a read blocked in the watch
        (closing the response alone leaves that thread in recv until the server speaks)."""
        response, self._response = self._response, None
        if response is not None:
            sock = getattr(getattr(response.raw, "connection", None), "sock", None)
            if isinstance(sock, socket.socket):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            response.close()
        self._session.close()


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError as exc:
        raise ApiError(f"cannot read the service account token {path}: {exc.strerror or exc}") from exc


def in_cluster_api(settings: KubernetesSettings, environ: Mapping[str, str]) -> tuple[str, bool | str]:
    """The API base URL and what to verify its certificate with; ConfigError when unknown."""
    if settings.api_url:
        url = settings.api_url
    else:
        host, port = environ.get("KUBERNETES_SERVICE_HOST", ""), environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise ConfigError("kubernetes.api_url", "not set, and KUBERNETES_SERVICE_HOST is empty (not in a pod?)")
        url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    if not url.startswith("https://"):
        return url, False
    if not os.path.isfile(settings.ca_file):
        raise ConfigError("kubernetes.ca_file", f"{settings.ca_file} does not exist (needed to verify {url})")
    return url, settings.ca_file
