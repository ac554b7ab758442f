"""The one HTTP client of every outbound fetch: aiohttp on the shared event loop, bounded.

Engines and their `/info`, gateways, GPU vendors' exporters, the Kubernetes API, the report's
Prometheus client and the prober all fetch through an `HttpClient`. What it promises:

- **One deadline over every byte**: connecting, TLS, reading credentials, the request, the status
  line and headers, the body and its trailers, all inside one `asyncio.timeout`. A target that
  trickles, stalls or sends trailer lines forever is cut when it runs out, and stopping the
  exporter cancels the fetch at once.
- **Bounded reads**: the status line and headers MAX_HEADER_BYTES in all (aiohttp bounds each line
  and their number); the body's cap counts decoded bytes (aiohttp inflates one bounded step at a
  time, so a gzip bomb meets the cap, never memory); a declared length over the cap is refused
  unread. Bodies are handed on one read at a time and parsed as they come, never held whole.
- **Nothing a target can grow**: no cookie jar; redirects followed only within the origin (scheme,
  host, port), at most MAX_REDIRECTS, or not at all; each client has its own connections, and one
  source's requests go one after the other, so an origin keeps at most one idle connection.
- **Errors by reason** (`llm_exporter_source_errors_total{reason}`): timeout, connection (a body
  shorter than its Content-Length included), http_status, too_large, parse; messages name the URL
  without credentials or query values (`redact`).

From the environment, as curl and requests read it (unless `trust_env=False`), when the client is
made: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY (host suffixes, ports, CIDR ranges), and
~/.netrc (or $NETRC) credentials for hosts that have no configured ones.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import ssl
import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import aiohttp
from aiohttp.http_exceptions import ContentEncodingError, ContentLengthError, TransferEncodingError

from exporter import __version__
from exporter.promtext import DECODE_ERRORS, MAX_LINE_CHARS, TooManySeries, WantedParser
from exporter.sources import event_loop
from exporter.sources.base import SourceError
from exporter.sources.http_environment import TlsOptions, netrc_entries, proxy_for
from exporter.sources.scrape_auth import ScrapeAuthorizer, basic_auth_header

ACCEPT_TEXT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"
USER_AGENT = f"llm-bottleneck-exporter/{__version__}"
#: what one read of a body asks for (aiohttp's buffer), and the most one inflate step produces
READ_BYTES = 65536
#: same-origin hops allowed (a trailing-slash redirect needs one)
MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# An error document's message is read this far and shown this long (error_detail).
ERROR_DETAIL_BYTES = 16 * 1024
ERROR_DETAIL_CHARS = 500
#: the status line and headers of one response, all together; what we fetch sends a few KB
MAX_HEADER_BYTES = 64 * 1024
#: what we ask for (gzip) and what needs no decoding; anything else is refused, not misread
DECODED_ENCODINGS = frozenset({"", "identity", "gzip", "deflate"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def redact(url: str) -> str:
    """The URL without `user:password@` and with every query value masked (an API key is often
    passed as one): what labels, logs and error messages may show."""
    parts = urlsplit(url)
    if "@" not in parts.netloc and not parts.query:
        return url
    query = "&".join(
        f"{name}=xxxxx" if equals else "xxxxx"
        for name, equals, _ in (item.partition("=") for item in parts.query.split("&"))
    )
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, query, ""))


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port), default ports filled in: what a redirect must keep to be followed."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port or _DEFAULT_PORTS.get(parts.scheme.lower())


class HttpClient:
    """One source's HTTP client: its own aiohttp session (made on the shared loop when first used),
    its credentials, TLS options and redirect rule."""

    def __init__(
        self,
        *,
        follow_redirects: bool = True,
        auth: ScrapeAuthorizer | None = None,
        trust_env: bool = True,
        tls: TlsOptions | None = None,
        connect_timeout: float | None = None,
    ) -> None:
        self.follow_redirects = follow_redirects
        self.auth = auth
        # The environment is read once, as the client is made: a daemon's does not change under it.
        self._proxies = urllib.request.getproxies() if trust_env else {}
        self._netrc = netrc_entries() if trust_env else None
        self._ssl = (tls or TlsOptions()).context()
        # the deadline is the caller's, over everything; a connection attempt may have one of its own
        self._timeout = aiohttp.ClientTimeout(total=None, connect=connect_timeout)
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def _current_session(self) -> aiohttp.ClientSession:
        if self._closed:  # a request after `close` (a source closed mid-round) makes no new session
            raise aiohttp.ClientConnectionError("the client is closed")
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl),
                cookie_jar=aiohttp.DummyCookieJar(),  # a target's cookies are never kept nor sent
                timeout=self._timeout,
                read_bufsize=READ_BYTES,
            )
        return self._session

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> aiohttp.ClientResponse:
        """One request (no redirect followed), its response once the status line and headers are
        in; the caller releases it. aiohttp's and the OS's errors as they are; SourceError for
        unreadable credentials."""
        sent = {"User-Agent": USER_AGENT, **headers}
        if self.auth is not None:
            sent["Authorization"] = await self.auth.header()
        elif self._netrc is not None:
            found = self._netrc.authenticators(urlsplit(url).hostname or "")
            if found is not None:
                sent["Authorization"] = basic_auth_header(found[0], found[2] or "")
        return await self._current_session().request(
            method,
            url,
            headers=sent,
            params=params,
            json=json_body,
            allow_redirects=False,
            proxy=proxy_for(url, self._proxies) if self._proxies else None,
        )

    def late(self, what: str) -> str:
        """What a fetch ran out of time doing: reading a credentials file, else `what`."""
        path = self.auth.reading_path if self.auth is not None else None
        return f"the credentials file {path} not read" if path else what

    async def get(
        self, url: str, shown: str, headers: Mapping[str, str], params: Mapping[str, str] | None
    ) -> aiohttp.ClientResponse:
        """The response to GET `url`, same-origin redirects followed by the client's rule."""
        for _ in range(MAX_REDIRECTS + 1):
            try:
                response = await self.send("GET", url, headers, params)
            except (aiohttp.ClientError, OSError, ValueError) as exc:
                raise request_error(shown, exc) from exc
            try:
                check_head(response, shown)
            except SourceError:
                response.release()
                raise
            location = response.headers.get("Location")
            if response.status not in REDIRECT_STATUSES or location is None:
                return response
            target = urljoin(str(response.url), location)
            response.release()
            same = origin(target) == origin(url)
            if not (self.follow_redirects and same):
                why = "another origin" if not same else "this target follows no redirect"
                raise SourceError(
                    "http_status", f"{shown}: HTTP {response.status} redirect to {redact(target)} not followed ({why})"
                )
            url, params = target, None
        raise SourceError("http_status", f"{shown}: more than {MAX_REDIRECTS} redirects")

    def close(self) -> None:
        """Close the connections (a request in flight on them fails); no request is sent after."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None and not session.closed:
            closing = event_loop.submit(session.close())
            if not event_loop.on_loop_thread():  # there, it closes once this step returns
                try:
                    closing.result(timeout=5)
                except Exception:  # closing is best effort: the loop may be stopping
                    pass


@asynccontextmanager
async def open_body(
    client: HttpClient,
    url: str,
    timeout_seconds: float,
    max_bytes: int,
    accept: str = ACCEPT_TEXT,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
) -> AsyncIterator[Body]:
    """GET `url` and yield its Body once a 200 is in; one deadline covers everything, the
    caller's reading of the body included. SourceError otherwise, with its reason."""
    shown = redact(url)
    asked = {"Accept": accept, "Accept-Encoding": "gzip", **(headers or {})}
    what = "no response"
    try:
        async with asyncio.timeout(timeout_seconds) as scope:
            response = await client.get(url, shown, asked, params)
            try:
                if response.status != 200:
                    # The server's reason, read until the deadline, but the status is the error.
                    deadline = scope.when()
                    assert deadline is not None  # entered with a timeout
                    scope.reschedule(None)
                    detail = await error_detail(Body(response, shown, ERROR_DETAIL_BYTES), deadline)
                    raise SourceError("http_status", f"{shown}: HTTP {response.status}{detail}")
                encoding = response.headers.get("Content-Encoding", "").strip().lower()
                if encoding not in DECODED_ENCODINGS:
                    raise SourceError(
                        "parse", f"{shown}: Content-Encoding {encoding[:40]!r} is not one this exporter decodes"
                    )
                declared = response.headers.get("Content-Length", "")
                # A compressed length over the cap means the decompressed body is over it too.
                if declared.isdigit() and int(declared) > max_bytes:
                    raise over_cap(shown, max_bytes, declared)
                what = "body not complete"
                yield Body(response, shown, max_bytes)
            finally:
                response.release()  # kept alive only if the body was read to its end
    except TimeoutError as exc:
        raise SourceError("timeout", f"{shown}: {client.late(what)} within {timeout_seconds:g}s") from exc


def check_head(response: aiohttp.ClientResponse, shown: str) -> None:
    """The status line and headers in all within MAX_HEADER_BYTES (aiohttp bounds each line and
    their number, 8 KiB and 128: a megabyte together)."""
    size = sum(len(name) + len(value) + 4 for name, value in response.raw_headers)
    if size + len(response.reason or "") + 15 > MAX_HEADER_BYTES:
        raise SourceError("too_large", f"{shown}: response headers over {MAX_HEADER_BYTES} bytes")


def request_error(shown: str, exc: BaseException) -> SourceError:
    """What a failed request (before any body) is, by reason, in a few words without the URL."""
    if isinstance(exc, SourceError):
        return exc
    if isinstance(exc, aiohttp.ClientResponseError):  # the response's head did not parse
        message = str(exc.message)
        if "content-encoding" in message.lower():  # one aiohttp cannot decode (brotli without Brotli)
            return SourceError("parse", f"{shown}: a Content-Encoding this exporter does not decode")
        if _over_a_bound(message):
            return SourceError("too_large", f"{shown}: response headers over the bound ({message[:80]})")
        return SourceError("connection", f"{shown}: malformed response ({message[:80]})")
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return SourceError("connection", f"{shown}: remote end closed connection without response")
    if isinstance(exc, aiohttp.ClientSSLError):
        return SourceError("connection", f"{shown}: tls: {_strerror(exc)}")
    return SourceError("connection", f"{shown}: {_strerror(exc)}")


def _over_a_bound(message: str) -> bool:
    """Whether aiohttp's parser refused a line or a count over its bounds (max_line_size,
    max_field_size, max_headers: its messages are all the exception carries)."""
    return message.startswith(("Got more than", "Too many")) or "too long" in message.lower()


def _strerror(exc: BaseException) -> str:
    """The OS's words for a socket error ("connection refused"), else the exception's type:
    aiohttp's own texts name the host and port, and a proxy's URL can carry credentials."""
    cause = getattr(exc, "os_error", None) or exc.__cause__ or exc
    if isinstance(cause, ssl.SSLError):
        return (cause.reason or type(cause).__name__).lower().replace("_", " ")
    if isinstance(cause, OSError) and cause.errno is not None and cause.errno > 0:
        return os.strerror(cause.errno).lower()
    if isinstance(cause, OSError) and cause.strerror:  # name resolution (gaierror)
        return cause.strerror.lower()
    return type(exc).__name__


class Body:
    """A 200's body, read under the open_body deadline and the byte cap, decoded."""

    def __init__(self, response: aiohttp.ClientResponse, shown: str, cap: int) -> None:
        self.content_type = response.headers.get("Content-Type", "")
        self._response = response
        self._shown = shown
        self._cap = cap
        #: decoded bytes read so far
        self.size = 0

    async def next_chunk(self) -> bytes:
        """The next decoded piece (what one read gave), b"" at the end; SourceError past the cap
        or when the body breaks off."""
        try:
            chunk = await self._response.content.readany()
        except aiohttp.ClientPayloadError as exc:
            cause = exc.__cause__
            if isinstance(cause, ContentEncodingError):
                raise undecodable(self._shown) from exc
            if isinstance(cause, (ContentLengthError, TransferEncodingError)):
                raise SourceError(
                    "connection", f"{self._shown}: connection closed before the body was complete"
                ) from exc
            message = str(getattr(cause, "message", "") or type(cause).__name__)
            if _over_a_bound(message):  # trailer lines by the hundred, a chunk size line of kilobytes
                raise SourceError("too_large", f"{self._shown}: body framing over the bound ({message[:80]})") from exc
            raise SourceError("connection", f"{self._shown}: malformed body ({message[:80]})") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise SourceError("connection", f"{self._shown}: {_strerror(exc)} reading the body") from exc
        self.size += len(chunk)
        if self.size > self._cap:
            raise over_cap(self._shown, self._cap)
        return chunk

    async def read(self) -> bytearray:
        """The whole body (at most the cap), in one buffer: for small documents such as JSON."""
        data = bytearray()
        while chunk := await self.next_chunk():
            data += chunk
        return data


def over_cap(shown_url: str, cap: int, declared: str | None = None) -> SourceError:
    """A body past the byte cap: its declared length already over it, or its decoded bytes so far."""
    if declared is not None:
        return SourceError("too_large", f"{shown_url}: body of {declared} bytes exceeds the {cap}-byte cap")
    return SourceError("too_large", f"{shown_url}: body exceeds the {cap}-byte cap")


def undecodable(shown_url: str) -> SourceError:
    return SourceError("parse", f"{shown_url}: body does not decode as its Content-Encoding says")


class LineBlocks:
    """Bytes in, text in blocks of whole lines out, one block per piece that ends any line; a line
    cut between pieces is joined to its rest (what `feed_parser` feeds the parser).

    A line longer than `max_line_chars` keeps only its head (plus less than one piece): its name
    is still there to be judged, and a body that is one huge line costs one piece, not the cap.
    """

    def __init__(self, max_line_chars: int = MAX_LINE_CHARS) -> None:
        # An invalid byte becomes a lone surrogate the parser sees (and drops the line for), not a
        # U+FFFD that would read as valid text.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors=DECODE_ERRORS)
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


async def feed_parser(body: Body, parser: WantedParser, shown_url: str) -> None:
    """Stream the body into the parser block by block as it arrives, until it has what it wants;
    a body over the parser's series or line caps is a `cardinality` SourceError."""
    lines = LineBlocks()
    while chunk := await body.next_chunk():
        block = lines.push(chunk)
        if block is not None and not feed_block(parser, block, shown_url):
            return
    last = lines.end()
    if last is not None:
        feed_block(parser, last, shown_url)


def feed_block(parser: WantedParser, block: str, shown_url: str) -> bool:
    """One block into the parser (False once it has had enough); over its caps, `cardinality`."""
    try:
        return parser.feed(block)
    except TooManySeries as exc:
        raise SourceError("cardinality", f"{shown_url}: {exc}") from exc


async def fetch_text(
    client: HttpClient, url: str, timeout_seconds: float, max_bytes: int, accept: str = ACCEPT_TEXT
) -> tuple[str, str]:
    """(body text, content type) or SourceError: one buffer and one string, no more."""
    async with open_body(client, url, timeout_seconds, max_bytes, accept) as body:
        return (await body.read()).decode("utf-8", errors="replace"), body.content_type


async def error_detail(body: Body, deadline: float, text_fallback: bool = False) -> str:
    """`: <message>` from a JSON error document (Prometheus's API `{"errorType", "error"}`, a
    Kubernetes `Status`, any `{"message": ...}`), read until the loop-clock `deadline` and no
    further than the body's cap; with `text_fallback`, the start of any other text (a proxy's
    page in front of an API); "" otherwise.

    Why: "HTTP 422" alone does not tell a user that their PromQL matched duplicate series, nor
    "HTTP 403" which ClusterRole rule is missing; the server already said so in the body.
    """
    is_json = "json" in body.content_type
    if not (is_json or text_fallback):
        return ""
    try:
        async with asyncio.timeout_at(deadline):
            data = bytes(await body.read())
    except (SourceError, TimeoutError):  # over the bound, past the deadline, cut off
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
