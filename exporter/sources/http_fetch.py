"""Bounded HTTP GET for scraping: a total deadline, a byte cap and a memory bound, enforced while
the body streams in.

`requests`' read timeout applies to each socket read, so a server that trickles a byte a second
would never time out, and a 100 MB body would be held in memory whole; both are stopped here.
Decompressed bytes are counted, so a gzip bomb hits the same cap.

The body is read with `read1` (returns whatever one socket read gave) and the socket timeout is
cut to the time left before each read: `iter_content` blocks until a whole chunk has arrived, so
a trickle only met the deadline once 64 KiB had come in, holding the source's thread (and the
process's exit, which joins it) for as long as the server cared to trickle.

Text bodies are handed on as blocks of lines, one read at a time (`line_blocks`), never as one
string: a 16 MiB body of short lines split at once is millions of string objects (~390 MB), where
a block is one read's worth. Redirects are followed only within one origin (scheme, host, port):
a target's data must come from the target. URLs in messages have their userinfo removed.
"""

from __future__ import annotations

import codecs
import contextvars
import ctypes
import http.client
import json
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
import requests.adapters
import requests.auth
import urllib3
import urllib3.connection
import urllib3.exceptions

from exporter.promtext import MAX_LINE_CHARS, TooManySeries, WantedParser
from exporter.sources import plain_http
from exporter.sources.base import SourceError
from exporter.sources.deadline_watch import WATCHDOG

ACCEPT_TEXT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"
READ_BYTES = 65536
#: same-origin hops allowed (a trailing-slash redirect needs one; requests would allow 30)
MAX_REDIRECTS = 3
# An error document's message is read this far and shown this long (error_detail).
ERROR_DETAIL_BYTES = 16 * 1024
ERROR_DETAIL_CHARS = 500
#: a body at least this large is followed by `release_free_memory`
TRIM_AFTER_BYTES = 4 * 1024 * 1024
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: prepared requests a session remembers (a target's /metrics and /info: a handful)
MAX_PREPARED = 16
#: the status line and headers of one response, all together: http.client alone bounds only each
#: line (64 KiB) and their number (100), 6.4 MB in all; what we fetch sends a few KB.
MAX_HEADER_BYTES = 64 * 1024
_USERINFO = re.compile(r"//[^/@\s]*@")


@lru_cache(maxsize=1024)
def redact(url: str) -> str:
    """The URL without `user:password@`: what labels, logs and error messages may show."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port), default ports filled in: what a redirect must keep to be followed."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(parts.scheme.lower())


class HeadersTooLarge(http.client.HTTPException):
    """The status line and headers of a response went past MAX_HEADER_BYTES."""


class _HeaderBudget:
    """The response's file while its status line and headers are read: counts them all."""

    def __init__(self, fp: Any, budget: int) -> None:
        self._fp = fp
        self._left = budget

    def readline(self, limit: int = -1) -> bytes:
        allowed = self._left + 1 if limit < 0 else min(limit, self._left + 1)
        line: bytes = self._fp.readline(allowed)
        self._left -= len(line)
        if self._left < 0:
            raise HeadersTooLarge(f"response headers over {MAX_HEADER_BYTES} bytes")
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fp, name)


class _CappedHeadersResponse(plain_http.LeanHeadersResponse):
    """http.client's response (headers read without the email package where they are plain), its
    status line and headers bounded in total by MAX_HEADER_BYTES."""

    def begin(self) -> None:
        fp = self.fp
        budget = self.fp = _HeaderBudget(fp, MAX_HEADER_BYTES)  # type: ignore[assignment]
        try:
            super().begin()
        finally:
            if self.fp is budget:  # else begin() closed it and set None: leave that
                self.fp = fp


class _InFlight:
    """The sockets of the request in flight in this thread, which `within` shuts at its deadline:
    the one the request went out on, and a duplicate of a TLS connection's socket taken before its
    handshake (shutting that down wakes a handshake read too; it is closed when the request ends)."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.owned: list[socket.socket] = []

    def shut_down(self) -> None:
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close_owned(self) -> None:
        for sock in self.owned:
            sock.close()


_IN_FLIGHT: contextvars.ContextVar[_InFlight] = contextvars.ContextVar("in_flight")


def _track(sock: object, duplicate: bool = False) -> None:
    in_flight = _IN_FLIGHT.get(None)
    if in_flight is not None and isinstance(sock, socket.socket):
        if duplicate:
            sock = sock.dup()
            in_flight.owned.append(sock)
        in_flight.sockets.append(sock)


@contextmanager
def within(deadline: float) -> Iterator[None]:
    """Bound the request this thread sends meanwhile by the monotonic `deadline`: connection, TLS
    handshake, status line and headers (each socket read alone is bounded only by the read
    timeout, so a server trickling header bytes could hold the request as long as it liked).

    The process's one watchdog (deadline_watch) shuts the request's sockets at the deadline, which
    wakes the blocked read; the body is bounded by `Body`, which cuts each read to the time left.
    """
    in_flight = _InFlight()
    token = _IN_FLIGHT.set(in_flight)
    watch = WATCHDOG.watch(max(0.0, deadline - time.monotonic()), in_flight.shut_down)
    try:
        yield
    finally:
        watch.cancel()
        _IN_FLIGHT.reset(token)
        in_flight.close_owned()


def headers_too_large(exc: BaseException) -> bool:
    """Whether a failed request failed on MAX_HEADER_BYTES (requests nests it a few levels deep)."""
    return isinstance(_root(exc), HeadersTooLarge)


class _TrackedConnection(urllib3.connection.HTTPConnection):
    response_class = _CappedHeadersResponse

    def getresponse(self) -> Any:
        _track(self.sock)
        return super().getresponse()


class _TrackedTLSConnection(urllib3.connection.HTTPSConnection):
    response_class = _CappedHeadersResponse

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _track(sock, duplicate=True)  # the TLS wrap detaches `sock`; a duplicate stays usable
        return sock

    def getresponse(self) -> Any:
        _track(self.sock)
        return super().getresponse()


class _Pool(urllib3.HTTPConnectionPool):
    ConnectionCls = _TrackedConnection


class _TLSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _TrackedTLSConnection


class _DeadlineAdapter(requests.adapters.HTTPAdapter):
    """Connections that tell `within` their socket as the request goes out, and whose
    responses' headers are bounded in total (MAX_HEADER_BYTES)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _Pool, "https": _TLSPool}


def _as_is(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """An auth that adds nothing: what "no netrc entry" is remembered as."""
    return request


class _DeadlineSession(requests.Session):
    """Also remembers, per origin, what requests reads from the environment on every request
    (proxy variables, CA bundle variables, ~/.netrc): walking os.environ and stat-ing netrc files
    cost ~0.3 ms of CPU per scrape per target. The environment is read at the first request to an
    origin, as a daemon's environment does not change under it."""

    def __init__(self) -> None:
        super().__init__()
        self.mount("http://", _DeadlineAdapter())
        self.mount("https://", _DeadlineAdapter())
        self._environment: dict[tuple[object, ...], Any] = {}
        self._netrc: dict[tuple[str, str], Any] = {}
        self._prepared: dict[tuple[object, ...], requests.PreparedRequest] = {}
        #: kept-alive plain-HTTP connections (exporter.sources.plain_http), one idle per origin
        self.plain_connections = plain_http.PlainConnections(_CappedHeadersResponse)
        #: whether each URL asked is reached directly, not through a proxy
        self._direct: dict[str, bool] = {}
        self._plain_headers: dict[tuple[object, ...], dict[str, str]] = {}
        #: (host, port, path) of each URL the plain path requested
        self._plain_targets: dict[str, tuple[str, int, str]] = {}

    #: whether a redirect within the origin is followed (by the plain path as by requests)
    follows_redirects = False

    def takes_plain_path(self, url: str) -> bool:
        """Whether `open_body` may GET `url` on a kept-alive http.client connection: plain HTTP,
        directly (no proxy the environment names for it), with no cookie to send back and no hook
        to run: everything a target could tell apart is then the same as through requests."""
        if not url.startswith("http://") or len(self.cookies) or any(self.hooks.values()):
            return False
        direct = self._direct.get(url)
        if direct is not None:
            return direct
        parts = urlsplit(url)
        try:
            parts.port  # noqa: B018  (a malformed port is requests' to report)
        except ValueError:
            return False
        if "@" in parts.netloc or not parts.hostname:
            return False
        # the environment's proxies are remembered per origin by merge_environment_settings
        proxies = self.merge_environment_settings(url, {}, True, None, None)["proxies"]
        direct = requests.utils.select_proxy(url, proxies) is None
        if len(self._direct) >= MAX_PREPARED:
            self._direct.clear()
        self._direct[url] = direct
        return direct

    def plain_headers(self, url: str, headers: Mapping[str, str]) -> dict[str, str]:
        """The headers requests would send: the session's, then the request's, then the auth's.

        Remembered per URL and headers (the session's included) where no auth adds anything, so
        an unauthenticated target's scrape skips requests' header machinery (~70 us); an auth hook
        runs for every request, so a rotated token is read as before. Not to be modified.
        """
        key = (url, tuple(headers.items()), tuple(self.headers.items()))
        if self.auth is None:
            found = self._plain_headers.get(key)
            if found is not None:
                return found
        prepared = requests.PreparedRequest()
        prepared.method, prepared.url = "GET", url
        merged: dict[str, str] = {k: str(v) for k, v in {**self.headers, **headers}.items() if v is not None}
        prepared.headers = requests.structures.CaseInsensitiveDict(merged)
        auth = self.auth or (self._netrc_auth(url) if self.trust_env else None)
        if isinstance(auth, tuple) and len(auth) == 2:
            auth = requests.auth.HTTPBasicAuth(*auth)
        if callable(auth):
            prepared = auth(prepared)
        result = dict(prepared.headers)
        if self.auth is None and auth in (None, _as_is):  # nothing per request: remembered
            if len(self._plain_headers) >= MAX_PREPARED:
                self._plain_headers.clear()
            self._plain_headers[key] = result
        return result

    def plain_target(self, url: str) -> tuple[str, int, str]:
        """(host, port, path with its query) of a plain-HTTP URL, worked out once per URL."""
        found = self._plain_targets.get(url)
        if found is None:
            parts = urlsplit(url)
            found = (parts.hostname or "", parts.port or 80, urlunsplit(("", "", parts.path or "/", parts.query, "")))
            if len(self._plain_targets) >= MAX_PREPARED:
                self._plain_targets.clear()
            self._plain_targets[url] = found
        return found

    def keep_cookies(self, url: str, headers: Mapping[str, str], response: http.client.HTTPResponse) -> None:
        """Cookies a target sets are kept as requests keeps them; the next request, holding one,
        goes through requests, which sends it back."""
        if not response.msg.get_all("Set-Cookie"):
            return
        prepared = requests.PreparedRequest()
        prepared.prepare(method="GET", url=url, headers=dict(headers))
        holder = requests.Response()
        holder._original_response = response  # type: ignore[attr-defined]  # what extract_cookies_to_jar reads
        requests.cookies.extract_cookies_to_jar(self.cookies, prepared, holder)

    def _netrc_auth(self, url: str) -> Any:
        parts = urlsplit(url)
        origin_key = (parts.scheme, parts.netloc)
        if origin_key not in self._netrc:
            self._netrc[origin_key] = requests.utils.get_netrc_auth(url) or _as_is
        return self._netrc[origin_key]

    def close(self) -> None:
        self.plain_connections.close()
        super().close()

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        if not self.trust_env or proxies or not isinstance(verify, (bool, str, type(None))):
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        parts = urlsplit(str(url))
        key = (parts.scheme, parts.netloc, stream, verify, cert if isinstance(cert, (str, type(None))) else tuple(cert))
        settings = self._environment.get(key)
        if settings is None:
            settings = self._environment[key] = super().merge_environment_settings(url, {}, stream, verify, cert)
        return {**settings, "proxies": dict(settings["proxies"])}

    def prepare_request(self, request: requests.Request) -> requests.PreparedRequest:
        """requests' own, remembered per URL and headers: preparing parses the URL, merges cookie
        jars and headers (~0.3 ms); a copy of the same GET is ~10 µs. The auth is applied to every
        copy again (a rotated token file is read as before); anything with a body, cookies or
        hooks is prepared afresh."""
        if self.trust_env and not request.auth and not self.auth:
            request.auth = self._netrc_auth(request.url)
        params = request.params
        if (
            request.data
            or request.files
            or request.json is not None
            or request.cookies
            or len(self.cookies)
            or any(request.hooks.values())
            or not isinstance(params, Mapping | None)
        ):
            return super().prepare_request(request)
        key = (
            request.method,
            request.url,
            tuple(sorted((request.headers or {}).items())),
            tuple(sorted((params or {}).items())),
        )
        template = self._prepared.get(key)
        if template is None:
            if len(self._prepared) >= MAX_PREPARED:
                self._prepared.clear()
            template = self._prepared[key] = super().prepare_request(request)
        prepared = template.copy()
        auth = request.auth or self.auth
        if isinstance(auth, tuple) and len(auth) == 2:  # as requests' prepare_auth takes it
            auth = requests.auth.HTTPBasicAuth(*auth)
        if callable(auth):
            prepared = auth(prepared)
        return prepared


class SameOriginSession(_DeadlineSession):
    """Follows a redirect only to the same scheme, host and port; any other 3xx comes back as it
    is, and `open_body` refuses it by name."""

    def __init__(self) -> None:
        super().__init__()
        self.max_redirects = MAX_REDIRECTS

    follows_redirects = True

    def get_redirect_target(self, resp: requests.Response) -> str | None:
        target = super().get_redirect_target(resp)
        if target is None or origin(urljoin(resp.url, target)) != origin(resp.url):
            return None
        return target


class NoRedirectSession(_DeadlineSession):
    """Follows no redirect at all (discovered targets: a redirect could point anywhere)."""

    def get_redirect_target(self, resp: requests.Response) -> None:
        return None


class Body:
    """A response whose headers are in and whose body is read under the deadline and the cap."""

    def __init__(self, content_type: str, url: str, deadline: float, timeout_seconds: float, cap: int) -> None:
        self.content_type = content_type
        self._url = url
        self._deadline = deadline
        self._timeout_seconds = timeout_seconds
        self._cap = cap
        #: bytes read so far (decoded)
        self.size = 0

    def _decoded(self) -> Iterator[bytes]:
        """The decoded body in pieces, each read bounded by the deadline (the transport's part)."""
        raise NotImplementedError

    def chunks(self) -> Iterator[bytes]:
        """The decoded body, one socket read at a time; SourceError past the deadline or the cap."""
        for chunk in self._decoded():
            self.size += len(chunk)
            if self.size > self._cap:
                raise plain_http.over_cap(self._url, self._cap)
            yield chunk

    def read(self) -> bytearray:
        """The whole body (at most the cap), in one buffer: for small documents such as JSON."""
        data = bytearray()
        for chunk in self.chunks():
            data += chunk
        return data

    def line_blocks(self) -> Iterator[str]:
        """The body as UTF-8 text, in blocks of whole lines (see `line_blocks`)."""
        return line_blocks(self.chunks())


class ResponseBody(Body):
    """The body of a requests response (streamed)."""

    def __init__(self, response: requests.Response, url: str, deadline: float, timeout_seconds: float, cap: int):
        super().__init__(response.headers.get("Content-Type", ""), url, deadline, timeout_seconds, cap)
        self.response = response

    def _decoded(self) -> Iterator[bytes]:
        url, response = self._url, self.response
        sock = _socket_of(response)
        try:
            while True:
                remaining = self._deadline - time.monotonic()
                if remaining <= 0:
                    raise SourceError("timeout", f"{url}: body not complete within {self._timeout_seconds:g}s")
                if sock is not None:
                    sock.settimeout(remaining)
                chunk = response.raw.read1(READ_BYTES, decode_content=True)
                if not chunk:
                    return
                yield chunk
        except (TimeoutError, urllib3.exceptions.ReadTimeoutError) as exc:
            raise SourceError("timeout", f"{url}: body not complete within {self._timeout_seconds:g}s") from exc
        except urllib3.exceptions.DecodeError as exc:
            raise plain_http.undecodable(url) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError("connection", f"{url}: {_short(exc)}") from exc


class PlainBody(Body):
    """The body of a plain-HTTP response on a kept-alive connection (exporter.sources.plain_http):
    the connection goes back to its session only once the body was read to its end."""

    def __init__(
        self,
        response: http.client.HTTPResponse,
        sock: socket.socket | None,
        url: str,
        deadline: float,
        timeout_seconds: float,
        cap: int,
    ):
        super().__init__(response.getheader("Content-Type", "") or "", url, deadline, timeout_seconds, cap)
        self._response = response
        self._sock = sock
        self._decoder = plain_http.decoder_for(response.getheader("Content-Encoding", "") or "", url)
        self.complete = False

    def _decoded(self) -> Iterator[bytes]:
        message = f"{self._url}: body not complete within {self._timeout_seconds:g}s"
        yield from plain_http.read_decoded(
            self._response, self._sock, self._decoder, self._deadline, message, self._url
        )
        self.complete = True


class LineBlocks:
    """Bytes in, text in blocks of whole lines out, one block per piece that ends any line; a line
    cut between pieces is joined to its rest. Pushed to (`push`, then `end`) by the multiplexed
    fetch as bytes arrive; pulled through by `line_blocks`.

    A line longer than `max_line_chars` keeps only its head (plus less than one piece): its name
    is still there to be judged, and a body that is one huge line costs one piece, not the cap.
    """

    def __init__(self, max_line_chars: int = MAX_LINE_CHARS) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._max_line_chars = max_line_chars
        self._pending: list[str] = []
        self._pending_chars = 0

    def push(self, chunk: bytes) -> str | None:
        """The block of whole lines this piece completes, or None."""
        text = self._decoder.decode(chunk)
        cut = text.rfind("\n")
        if cut == -1:
            if self._pending_chars <= self._max_line_chars:
                self._pending.append(text)
                self._pending_chars += len(text)
            return None
        self._pending.append(text[:cut])
        block = "".join(self._pending)
        self._pending, self._pending_chars = [text[cut + 1 :]], len(text) - cut - 1
        return block

    def end(self) -> str | None:
        """What is left after the last piece (a last line without its newline), or None."""
        self._pending.append(self._decoder.decode(b"", final=True))
        last = "".join(self._pending)
        self._pending, self._pending_chars = [], 0
        return last or None


def line_blocks(chunks: Iterable[bytes], max_line_chars: int = MAX_LINE_CHARS) -> Iterator[str]:
    """Text in blocks of whole lines (`LineBlocks`), pulled from an iterable of bytes."""
    lines = LineBlocks(max_line_chars)
    for chunk in chunks:
        block = lines.push(chunk)
        if block is not None:
            yield block
    last = lines.end()
    if last is not None:
        yield last


@contextmanager
def open_body(
    session: requests.Session,
    url: str,
    timeout_seconds: float,
    max_bytes: int,
    accept: str = ACCEPT_TEXT,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
) -> Iterator[Body]:
    """GET `url` and yield its Body once a 200 is in; the deadline covers headers and body.

    SourceError otherwise, with a reason label and the URL without credentials.
    """
    shown = redact(url)
    deadline = time.monotonic() + timeout_seconds
    if isinstance(session, _DeadlineSession) and params is None and session.takes_plain_path(url):
        with _open_plain(session, url, shown, deadline, timeout_seconds, max_bytes, accept, headers) as plain:
            yield plain
        return
    try:
        with within(deadline):
            response = session.get(
                url,
                timeout=(timeout_seconds, timeout_seconds),
                stream=True,
                params=params,
                headers={"Accept": accept, "Accept-Encoding": "gzip", **(headers or {})},
            )
    except requests.TooManyRedirects as exc:
        raise SourceError("http_status", f"{shown}: more than {MAX_REDIRECTS} redirects") from exc
    except requests.Timeout as exc:
        raise SourceError("timeout", f"{shown}: no response within {timeout_seconds:g}s") from exc
    except requests.RequestException as exc:
        if headers_too_large(exc):
            raise SourceError("too_large", f"{shown}: {_short(exc)}") from exc
        if time.monotonic() >= deadline:  # the watchdog shut the socket
            raise SourceError("timeout", f"{shown}: no response within {timeout_seconds:g}s") from exc
        raise SourceError("connection", f"{shown}: {_short(exc)}") from exc
    with response:
        if response.is_redirect:
            location = redact(urljoin(response.url, response.headers.get("Location", "")))
            raise SourceError(
                "http_status",
                f"{shown}: HTTP {response.status_code} redirect to {location} not followed (another origin)",
            )
        if response.status_code != 200:
            detail = error_detail(ResponseBody(response, shown, deadline, timeout_seconds, ERROR_DETAIL_BYTES))
            raise SourceError("http_status", f"{shown}: HTTP {response.status_code}{detail}")
        declared = response.headers.get("Content-Length")
        # A compressed length over the cap means the decompressed body is over it too.
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise plain_http.over_cap(shown, max_bytes, declared)
        body: Body = ResponseBody(response, shown, deadline, timeout_seconds, max_bytes)
        try:
            yield body
        finally:
            if body.size >= TRIM_AFTER_BYTES:
                release_free_memory()


@contextmanager
def _open_plain(
    session: _DeadlineSession,
    url: str,
    shown: str,
    deadline: float,
    timeout_seconds: float,
    max_bytes: int,
    accept: str,
    headers: Mapping[str, str] | None,
) -> Iterator[PlainBody]:
    """open_body's plain-HTTP path (exporter.sources.plain_http): the same errors, reasons and
    messages, redirects followed within the origin by the session's rule, at most MAX_REDIRECTS."""
    for _ in range(MAX_REDIRECTS + 1):
        host, port, path = session.plain_target(url)
        request_headers = session.plain_headers(url, {"Accept": accept, "Accept-Encoding": "gzip", **(headers or {})})
        try:
            with within(deadline):
                connection, response = plain_http.send_get(
                    session.plain_connections, host, port, path, request_headers, deadline, _IN_FLIGHT.get().sockets
                )
        except SourceError:
            raise
        except HeadersTooLarge as exc:
            raise SourceError("too_large", f"{shown}: {_short(exc)}") from exc
        except (TimeoutError, OSError, http.client.HTTPException) as exc:
            if isinstance(exc, TimeoutError) or time.monotonic() >= deadline:  # the watchdog shut the socket
                raise SourceError("timeout", f"{shown}: no response within {timeout_seconds:g}s") from exc
            raise SourceError("connection", f"{shown}: {_short(exc)}") from exc
        kept: http.client.HTTPConnection | None = connection
        body: PlainBody | None = None
        try:
            session.keep_cookies(url, request_headers, response)
            location = response.getheader("Location")
            if response.status in plain_http.REDIRECT_STATUSES and location is not None:
                target = urljoin(url, location)
                if session.follows_redirects and origin(target) == origin(url):
                    url = target
                    continue  # finally: the redirect's body is not read, its connection closed
                raise SourceError(
                    "http_status",
                    f"{shown}: HTTP {response.status} redirect to {redact(target)} not followed (another origin)",
                )
            if response.status != 200:
                detail = error_detail(
                    PlainBody(response, connection.sock, shown, deadline, timeout_seconds, ERROR_DETAIL_BYTES)
                )
                raise SourceError("http_status", f"{shown}: HTTP {response.status}{detail}")
            declared = response.getheader("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise plain_http.over_cap(shown, max_bytes, declared)
            body = PlainBody(response, connection.sock, shown, deadline, timeout_seconds, max_bytes)
            yield body
            if body.complete and not response.will_close and connection.sock is not None:
                session.plain_connections.give_back(host, port, connection)
                kept = None
            return
        finally:
            if kept is not None:
                plain_http.close(kept, response)
            if body is not None and body.size >= TRIM_AFTER_BYTES:
                release_free_memory()
    raise SourceError("http_status", f"{shown}: more than {MAX_REDIRECTS} redirects")


def feed_parser(body: Body, parser: WantedParser, shown_url: str) -> None:
    """Stream the body into the parser block by block until it has what it wants; a body over
    the parser's series or line caps is a `cardinality` SourceError."""
    for block in body.line_blocks():
        if not feed_block(parser, block, shown_url):
            break


def feed_block(parser: WantedParser, block: str, shown_url: str) -> bool:
    """One block into the parser (False once it has had enough); over its caps, a `cardinality`
    SourceError."""
    try:
        return parser.feed(block)
    except TooManySeries as exc:
        raise SourceError("cardinality", f"{shown_url}: {exc}") from exc


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim with
        return None


_MALLOC_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Hand memory freed by a large body back to the system: glibc keeps what the worker threads'
    arenas freed. Measured (tests/perf/bench_hostile_targets.py, 8 hostile targets at their caps):
    peak 68 -> 59 MiB, and RSS once they are gone +13 -> +9 MiB over the baseline."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def fetch_text(
    session: requests.Session,
    url: str,
    timeout_seconds: float,
    max_bytes: int,
    accept: str = ACCEPT_TEXT,
) -> tuple[str, str]:
    """Return (body text, content type) or raise SourceError: one buffer and one string, no more."""
    with open_body(session, url, timeout_seconds, max_bytes, accept) as body:
        return body.read().decode("utf-8", errors="replace"), body.content_type


def _socket_of(response: requests.Response) -> socket.socket | None:
    """The connection's socket, to bound each read by the overall deadline (None if hidden)."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def error_detail(body: Body, text_fallback: bool = False) -> str:
    """`: <message>` from a JSON error document (Prometheus's API `{"errorType", "error"}`, a
    Kubernetes `Status`, any `{"message": ...}`), read within the body's deadline and no further
    than ERROR_DETAIL_BYTES; with `text_fallback`, the start of any other text (a proxy's page in
    front of an API); "" otherwise.

    Why: "HTTP 422" alone does not tell a user that their PromQL matched duplicate series, nor
    "HTTP 403" which ClusterRole rule is missing; the server already said so in the body.
    """
    is_json = "json" in body.content_type
    if not (is_json or text_fallback):
        return ""
    try:
        data = bytes(body.read())
    except SourceError:  # over the bound, past the deadline, cut off
        return ""
    message, kind = _json_error(data) if is_json else (None, None)
    if message is None and text_fallback:
        message = data.decode("utf-8", errors="replace")
    if not message or not message.strip():
        return ""
    text = " ".join(message.split())[:ERROR_DETAIL_CHARS]
    return f" ({kind}): {text}" if kind else f": {text}"


def _json_error(data: bytes) -> tuple[str | None, str | None]:
    """(message, errorType) of a JSON error document; (None, None) when it holds none."""
    try:
        document = json.loads(data)
    except ValueError:
        return None, None
    if not isinstance(document, dict):
        return None, None
    message = document.get("error") or document.get("message")
    kind = document.get("errorType")
    return (message if isinstance(message, str) else None), (kind if isinstance(kind, str) and kind else None)


def _short(exc: BaseException) -> str:
    """The root cause in a few words: requests nests the socket error three exceptions deep.

    Never the exception's URL: it would carry the credentials `redact` keeps out of messages.
    """
    root = _root(exc)
    if isinstance(root, OSError) and root.strerror:
        return root.strerror.lower()
    text = _USERINFO.sub("//", str(root)) or type(root).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _root(exc: BaseException) -> BaseException:
    """The innermost cause or context of `exc` (at most 8 levels down)."""
    root: BaseException = exc
    seen = 0
    while seen < 8 and (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
        seen += 1
    return root
