"""The two Kubernetes API calls engine discovery makes: list and watch the pods on one node.

The exporter's HTTP client (exporter.sources.http_fetch) against the REST API, as client-go's
reflector does it: a paged list, then a streamed watch of one JSON event per line. Each request
has one total deadline, connection, headers and body together, headers bounded in total like an
engine's, and no redirect is followed. In a pod the address, CA and token come from the
environment and the mounted service account; the token is re-read for each request, since bound
service-account tokens are rotated by the kubelet.

The calls are made on the shared event loop and waited for by discovery's thread; `close` (from
any thread) cancels the call in flight, so a watch the server holds open ends at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import aiohttp

from exporter.settings import KubernetesSettings
from exporter.sources import event_loop
from exporter.sources.base import SourceError
from exporter.sources.http_fetch import ERROR_DETAIL_BYTES, MAX_HEADER_BYTES, Body, HttpClient, TlsOptions, error_detail
from exporter.validation import ConfigError

T = TypeVar("T")

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
        tls = TlsOptions(ca_file=verify) if isinstance(verify, str) else TlsOptions(insecure_skip_verify=not verify)
        # in-cluster traffic: never through an HTTP(S)_PROXY, never a netrc entry
        self._client = HttpClient(
            follow_redirects=False, trust_env=False, tls=tls, connect_timeout=CONNECT_TIMEOUT_SECONDS
        )
        self._call: concurrent.futures.Future[Any] | None = None
        self._closed = False

    def list_pods(self, node_name: str) -> tuple[list[dict[str, Any]], str]:
        """All pods on the node and the list's resourceVersion (following `continue` pages)."""
        items: list[dict[str, Any]] = []
        params = {"fieldSelector": f"spec.nodeName={node_name}", "limit": str(LIST_PAGE_SIZE)}
        while True:
            body = self._wait(self._list_page(params, self._headers()))
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
        watch = self._wait(self._open_watch(params, self._headers(), timeout_seconds + REQUEST_TIMEOUT_SECONDS))
        return self._events(watch)

    def _events(self, watch: _Watch) -> Iterator[dict[str, Any]]:
        """One JSON event per line; the watch ends at its deadline (timeoutSeconds and a margin)
        even if the server keeps it open, and no event may grow past MAX_EVENT_BYTES."""
        try:
            while (lines := self._wait(watch.next_lines())) is not None:
                for line in lines:
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise ApiError(f"watch event is not JSON ({exc})") from exc
        finally:
            event_loop.loop().call_soon_threadsafe(watch.response.release)

    def _headers(self) -> dict[str, str]:
        """Read in the calling thread (discovery's), never on the event loop."""
        headers = {"Accept": "application/json"}
        if self._token_file:
            headers["Authorization"] = f"Bearer {_read_token(self._token_file)}"
        return headers

    def _wait(self, call: Coroutine[Any, Any, T]) -> T:
        """Run `call` on the event loop and wait for it; ApiError once `close` cancelled it."""
        if self._closed:
            call.close()
            raise ApiError("closed")
        self._call = event_loop.submit(call)
        try:
            return self._call.result()
        except concurrent.futures.CancelledError:
            raise ApiError("closed") from None

    async def _list_page(self, params: dict[str, str], headers: dict[str, str]) -> dict[str, Any]:
        what = "no response"
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                response = await self._open(params, headers)
                try:
                    what = "list pods: body not complete"
                    data = await Body(response, self.base_url, MAX_PAGE_BYTES).read()
                finally:
                    response.release()
        except TimeoutError:
            raise ApiError(f"{self.base_url}: {what} within {REQUEST_TIMEOUT_SECONDS:g}s") from None
        except SourceError as exc:
            raise ApiError(f"list pods: {exc}") from exc
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise ApiError(f"list pods: response is not JSON ({exc})") from exc
        if not isinstance(body, dict):
            raise ApiError(f"list pods: response is not JSON (a {type(body).__name__}, not an object)")
        return body

    async def _open_watch(self, params: dict[str, str], headers: dict[str, str], lifetime: float) -> _Watch:
        deadline = asyncio.get_running_loop().time() + lifetime
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._open(params, headers)
        except TimeoutError:
            raise ApiError(f"{self.base_url}: no response within {lifetime:g}s") from None
        return _Watch(response, Body(response, self.base_url, MAX_WATCH_BYTES), deadline)

    async def _open(self, params: dict[str, str], headers: dict[str, str]) -> aiohttp.ClientResponse:
        """The response once its headers are in (a 200), within the caller's deadline."""
        try:
            response = await self._client.get(f"{self.base_url}/api/v1/pods", self.base_url, headers, params)
        except SourceError as exc:
            if exc.reason == "too_large":
                raise ApiError(f"{self.base_url}: response headers over {MAX_HEADER_BYTES} bytes") from exc
            raise ApiError(str(exc)) from exc
        if response.status == 200:
            return response
        try:
            if response.status == 410:
                raise ResourceExpired("410 Gone")
            # The API's reason (its Status message, or a proxy's text), read within 5 s at most.
            reading = asyncio.get_running_loop().time() + STATUS_READ_SECONDS
            body = Body(response, self.base_url, ERROR_DETAIL_BYTES)
            detail = await error_detail(body, reading, text_fallback=True) or ": (no readable reason)"
            hint = " (check the ClusterRole grants get/list/watch on pods)" if response.status == 403 else ""
            raise ApiError(f"HTTP {response.status} from {self.base_url}{detail}{hint}")
        finally:
            response.release()

    def close(self) -> None:
        """Also from another thread: the call in flight (a watch the server holds open) is
        cancelled, and the connections closed."""
        self._closed = True
        call = self._call
        if call is not None:
            call.cancel()
        self._client.close()


class _Watch:
    """An open watch: its response, and reading it line by line until the watch's deadline."""

    def __init__(self, response: aiohttp.ClientResponse, body: Body, deadline: float) -> None:
        self.response = response
        self._body = body
        self._deadline = deadline
        self._buffer = bytearray()

    async def next_lines(self) -> list[bytes] | None:
        """The next complete non-blank lines (at least one), or None once the watch is over: its
        end, or its deadline (as if the server had ended it: the caller watches again)."""
        try:
            async with asyncio.timeout_at(self._deadline):
                while True:
                    chunk = await self._body.next_chunk()
                    if not chunk:
                        return None
                    end = chunk.rfind(b"\n")
                    if end == -1:
                        self._buffer += chunk
                        if len(self._buffer) > MAX_EVENT_BYTES:
                            raise ApiError(f"watch event over {MAX_EVENT_BYTES} bytes")
                        continue
                    complete = bytes(self._buffer) + chunk[:end]
                    self._buffer = bytearray(chunk[end + 1 :])
                    found = [line for line in complete.split(b"\n") if line.strip()]
                    if found:
                        return found
        except TimeoutError:
            return None
        except SourceError as exc:
            raise ApiError(f"watch interrupted: {exc}") from exc


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
