"""A plain-HTTP GET on one kept-alive connection per origin: the scrape path's common case without
requests' per-request machinery.

A scrape through requests cost ~1.3 ms of CPU per target for a 54 KB body, against ~0.5 ms for
the same GET through http.client on a kept-alive connection (issue #23's budget is 1 ms per
target, parse included). `open_body` takes this path only where it changes nothing a target can
tell: `http://`, no proxy for the origin, no cookies held, no query parameters, no response hooks;
TLS, proxies and cookies go through requests as before. The guarantees are open_body's own: the
deadline covers connect, headers and body (the shared watchdog shuts a socket whose headers
trickle past it; each body read waits at most the time left), decompressed bytes count against
the cap and are inflated at most one read's worth at a time, a body shorter than its
Content-Length is a connection error, not a short body.

Descriptors: at most one idle connection per origin per session (a source scrapes its target
one request at a time), closed with the session; a connection whose body was not read to its end
(an error, the cap, a parser that had enough) is closed, never reused.
"""

from __future__ import annotations

import email.parser
import http.client
import re
import select
import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

from exporter.sources.base import SourceError

#: what one read of the body asks for, and the most one inflate step may produce
READ_BYTES = 65536
#: statuses requests treats as redirects (with a Location)
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


#: http.client's own bounds on one header line and on the number of lines (its private names)
MAX_HEADER_LINE = getattr(http.client, "_MAXLINE", 65536)
MAX_HEADER_LINES = getattr(http.client, "_MAXHEADERS", 100)
#: a header line the email parser would read as `Name: value` and nothing else: a name of visible
#: characters, no continuation, no stray carriage return
_PLAIN_HEADER_LINE = re.compile(rb"[!-9;-~]+:[^\r\n]*\r?\n")


def read_headers(fp: BinaryIO | Any) -> http.client.HTTPMessage:
    """`http.client.parse_headers` without the email package where it is not needed.

    http.client hands every response's header block to email.parser, which was most of the CPU
    of a plain scrape's status line and headers (~0.3 ms of the ~0.5 ms http.client spent per
    54 KB scrape). Header blocks of plain `Name: value` lines, every engine's and gateway's, are
    stored as the parser would store them (value after the colon, leading blanks and the line end
    stripped) through `Message.set_raw`; any other block (a folded line, an odd name) goes to the
    email parser as before, so what a header reads as never differs. Lines and count are bounded
    as http.client bounds them.
    """
    lines: list[bytes] = []
    while True:
        line = fp.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > MAX_HEADER_LINES:
            raise http.client.HTTPException(f"got more than {MAX_HEADER_LINES} headers")
        if line in (b"\r\n", b"\n", b""):
            break
    fields = lines[:-1]
    if all(_PLAIN_HEADER_LINE.fullmatch(line) for line in fields):
        message = http.client.HTTPMessage()
        for line in fields:
            name, _, value = line.decode("iso-8859-1").partition(":")
            message.set_raw(name, value.lstrip(" \t").rstrip("\r\n"))
        return message
    parsed: http.client.HTTPMessage = email.parser.Parser(_class=http.client.HTTPMessage).parsestr(
        b"".join(lines).decode("iso-8859-1")
    )
    return parsed


class LeanHeadersResponse(http.client.HTTPResponse):
    """http.client's response, its headers read by `read_headers`; `begin` is http.client's own
    (3.11) but for that one call, so status, length, chunking and keep-alive are decided as there."""

    def begin(self) -> None:
        if self.headers is not None:
            return  # already started reading the response
        while True:  # until a response that is not 100 Continue
            version, status, reason = self._read_status()
            if status != http.client.CONTINUE:
                break
            read_headers(self.fp)  # the 100 response's headers, skipped
        self.code = self.status = status
        self.reason = reason.strip()
        if version in ("HTTP/1.0", "HTTP/0.9"):
            self.version = 10
        elif version.startswith("HTTP/1."):
            self.version = 11
        else:
            raise http.client.UnknownProtocol(version)
        self.headers = self.msg = read_headers(self.fp)
        transfer_encoding = self.headers.get("transfer-encoding")
        self.chunked = bool(transfer_encoding and transfer_encoding.lower() == "chunked")
        if self.chunked:
            self.chunk_left = None
        self.will_close = self._check_close()
        self.length = None
        length = self.headers.get("content-length")
        if length and not self.chunked:
            try:
                self.length = int(length)
            except ValueError:
                self.length = None
            else:
                if self.length < 0:  # a negative length is no length
                    self.length = None
        if (
            status in (http.client.NO_CONTENT, http.client.NOT_MODIFIED)
            or 100 <= status < 200
            or self._method == "HEAD"
        ):
            self.length = 0
        if not self.will_close and not self.chunked and self.length is None:
            self.will_close = True  # no length and not chunked: the body ends when the connection does


class PlainConnections:
    """The idle kept-alive connections of one session, at most one per (host, port)."""

    def __init__(self, response_class: type[http.client.HTTPResponse] = http.client.HTTPResponse) -> None:
        self._idle: dict[tuple[str, int], http.client.HTTPConnection] = {}
        #: what reads each response (open_body's bounds its status line and headers in total)
        self.response_class = response_class
        #: each request's bytes as http.client writes them, by (host, port, path, headers)
        self._requests: dict[tuple[str, int, str, tuple[tuple[str, str], ...]], bytes] = {}

    def request_bytes(self, host: str, port: int, path: str, headers: dict[str, str]) -> bytes:
        """The GET as http.client sends it (request line, Host, the headers, in its checks and its
        encoding), written once by http.client itself and then reused: a target scraped every few
        seconds asks for the same bytes, and putrequest/putheader were a fifth of a plain scrape's
        CPU. Raises what http.client's request() raises for a path or header it refuses."""
        key = (host, port, path, tuple(headers.items()))
        found = self._requests.get(key)
        if found is None:
            writer = http.client.HTTPConnection(host, port)
            capture = _SentBytes()
            writer.sock = capture
            writer.request("GET", path, headers=headers)
            found = bytes(capture.sent)
            if len(self._requests) >= MAX_REQUESTS_KEPT:
                self._requests.clear()
            self._requests[key] = found
        return found

    def take(self, host: str, port: int) -> tuple[http.client.HTTPConnection, bool]:
        """(connection, reused): the idle one if the server has not closed it meanwhile."""
        connection = self._idle.pop((host, port), None)
        if connection is not None and connection.sock is not None and not _dropped(connection.sock):
            return connection, True
        if connection is not None:
            connection.close()
        return http.client.HTTPConnection(host, port), False

    def give_back(self, host: str, port: int, connection: http.client.HTTPConnection) -> None:
        previous = self._idle.pop((host, port), None)
        if previous is not None:
            previous.close()
        self._idle[(host, port)] = connection

    def close(self) -> None:
        for connection in self._idle.values():
            connection.close()
        self._idle.clear()


#: request bytes a session keeps (one per target it scrapes, and the redirects it follows)
MAX_REQUESTS_KEPT = 16


class _SentBytes:
    """Stands in for the socket while http.client writes a request: keeps what it would send."""

    def __init__(self) -> None:
        self.sent = bytearray()

    def sendall(self, data: bytes) -> None:
        self.sent += data


def _dropped(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable has been closed by the server (or holds bytes
    nobody asked for): either way it cannot carry the next request. poll, not select: a
    descriptor number past 1024 is fine."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def send_get(
    connections: PlainConnections,
    host: str,
    port: int,
    path: str,
    headers: dict[str, str],
    deadline: float,
    on_socket: list[socket.socket],
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """Send the GET and read the status line and headers before `deadline`.

    The socket goes into `on_socket` as soon as there is one, for the caller's watchdog. A kept-alive
    connection the server closed just as the request went out is retried once on a new one (a
    GET, and nothing of a response had arrived); any other failure is the caller's to classify:
    TimeoutError, OSError or http.client.HTTPException.
    """
    for attempt in range(2):
        connection, reused = connections.take(host, port)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            connection.close()
            raise TimeoutError("deadline passed before the request went out")
        response: http.client.HTTPResponse | None = None
        try:
            if connection.sock is None:
                connection.timeout = remaining
                connection.connect()
            assert connection.sock is not None
            on_socket.append(connection.sock)
            connection.sock.settimeout(remaining)
            # http.client's request/getresponse bookkeeping, without its per-request cost: the
            # request's bytes are written once (request_bytes), the response read as getresponse
            # reads it; the connection is reused only once its body was read to the end.
            connection.sock.sendall(connections.request_bytes(host, port, path, headers))
            response = connections.response_class(connection.sock, method="GET")
            response.begin()
            return connection, response
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            close(connection, response)
            if not reused or attempt == 1 or time.monotonic() >= deadline:
                raise
        except BaseException:
            close(connection, response)
            raise
    raise AssertionError("unreachable")  # pragma: no cover


def close(connection: http.client.HTTPConnection, response: http.client.HTTPResponse | None) -> None:
    """Close a connection and the response read from it: the response's file holds the socket
    open (socket.makefile) until it is closed too, which http.client's own connection did."""
    if response is not None:
        response.close()
    connection.close()


def decoder_for(content_encoding: str, shown_url: str) -> zlib._Decompress | None:
    """None for an identity body; gzip and deflate (zlib-wrapped or gzip-framed) inflate."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # either header, detected
    raise SourceError("parse", f"{shown_url}: Content-Encoding {encoding[:40]!r} is not one this exporter decodes")


def over_cap(shown_url: str, cap: int, declared: str | None = None) -> SourceError:
    """A body past the byte cap: its declared length already over it, or its decoded bytes so far."""
    if declared is not None:
        return SourceError("too_large", f"{shown_url}: body of {declared} bytes exceeds the {cap}-byte cap")
    return SourceError("too_large", f"{shown_url}: body exceeds the {cap}-byte cap")


def undecodable(shown_url: str) -> SourceError:
    return SourceError("parse", f"{shown_url}: body does not decode as its Content-Encoding says")


def inflate(decoder: zlib._Decompress, raw: bytes, shown_url: str) -> Iterator[bytes]:
    """`raw` inflated one bounded step (at most READ_BYTES out) at a time, so a small compressed
    body that inflates to gigabytes is never held whole: the caller's cap stops it step by step.
    Both transports (this module's and the multiplexer's) decode through here."""
    try:
        data = decoder.decompress(raw, READ_BYTES)
        while True:
            if data:
                yield data
            if not decoder.unconsumed_tail:
                return
            data = decoder.decompress(decoder.unconsumed_tail, READ_BYTES)
    except zlib.error as exc:
        raise undecodable(shown_url) from exc


def inflate_end(decoder: zlib._Decompress, shown_url: str) -> bytes:
    """What the decoder still holds at the body's end; a stream cut short does not decode."""
    try:
        tail = decoder.flush()
    except zlib.error as exc:
        raise undecodable(shown_url) from exc
    if not decoder.eof:
        raise undecodable(shown_url)
    return tail


def read_decoded(
    response: http.client.HTTPResponse,
    sock: socket.socket | None,
    decoder: zlib._Decompress | None,
    deadline: float,
    timeout_message: str,
    shown_url: str,
) -> Iterator[bytes]:
    """The body, decoded, one socket read (or one bounded inflate step) at a time; ends cleanly
    only at the body's real end. Each read waits at most until `deadline`."""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SourceError("timeout", timeout_message)
            if sock is not None:
                sock.settimeout(remaining)
            raw = response.read1(READ_BYTES) if response.length != 0 else b""
            if not raw:
                if response.length:  # Content-Length promised more than came
                    raise SourceError("connection", f"{shown_url}: connection closed before the body was complete")
                if decoder is not None and (tail := inflate_end(decoder, shown_url)):
                    yield tail
                response.read()  # marks the response complete, so its connection may be reused
                return
            if decoder is None:
                yield raw
            else:
                yield from inflate(decoder, raw, shown_url)
    except TimeoutError as exc:
        raise SourceError("timeout", timeout_message) from exc
    except (http.client.HTTPException, OSError, ValueError) as exc:
        raise SourceError("connection", f"{shown_url}: {type(exc).__name__} reading the body") from exc
