"""Bounded HTTP GET for scraping: time and size limits enforced while the body streams in.

`requests`' read timeout applies to each socket read, so a server that trickles a byte a second
would never time out, and a 100 MB body would be held in memory whole; both are stopped here.
Decompressed bytes are counted, so a gzip bomb hits the same cap.

The body is read with `read1` (returns whatever one socket read gave) and the socket timeout is
cut to the time left before each read: `iter_content` blocks until a whole chunk has arrived, so
a trickle only met the deadline once 64 KiB had come in, holding the source's thread (and the
process's exit, which joins it) for as long as the server cared to trickle.
"""

from __future__ import annotations

import socket
import time

import requests
import urllib3.exceptions

from exporter.sources.base import SourceError

ACCEPT_TEXT = "text/plain;version=0.0.4;q=1.0,*/*;q=0.1"


def fetch_text(
    session: requests.Session,
    url: str,
    timeout_seconds: float,
    max_bytes: int,
    accept: str = ACCEPT_TEXT,
) -> tuple[str, str]:
    """Return (body text, content type) or raise SourceError with a reason label."""
    deadline = time.monotonic() + timeout_seconds
    try:
        response = session.get(
            url,
            timeout=(timeout_seconds, timeout_seconds),
            stream=True,
            headers={"Accept": accept, "Accept-Encoding": "gzip"},
        )
    except requests.Timeout as exc:
        raise SourceError("timeout", f"{url}: no response within {timeout_seconds:g}s") from exc
    except requests.RequestException as exc:
        raise SourceError("connection", f"{url}: {_short(exc)}") from exc
    with response:
        if response.status_code != 200:
            raise SourceError("http_status", f"{url}: HTTP {response.status_code}")
        declared = response.headers.get("Content-Length")
        # A compressed length over the cap means the decompressed body is over it too.
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise SourceError("too_large", f"{url}: body of {declared} bytes exceeds the {max_bytes}-byte cap")
        chunks: list[bytes] = []
        size = 0
        sock = _socket_of(response)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SourceError("timeout", f"{url}: body not complete within {timeout_seconds:g}s")
                if sock is not None:
                    sock.settimeout(remaining)
                chunk = response.raw.read1(65536, decode_content=True)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise SourceError("too_large", f"{url}: body exceeds the {max_bytes}-byte cap")
                chunks.append(chunk)
        except (TimeoutError, urllib3.exceptions.ReadTimeoutError) as exc:
            raise SourceError("timeout", f"{url}: body not complete within {timeout_seconds:g}s") from exc
        except urllib3.exceptions.DecodeError as exc:
            raise SourceError("parse", f"{url}: body does not decode as its Content-Encoding says") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError("connection", f"{url}: {_short(exc)}") from exc
        content_type = response.headers.get("Content-Type", "")
    return b"".join(chunks).decode("utf-8", errors="replace"), content_type


def _socket_of(response: requests.Response) -> socket.socket | None:
    """The connection's socket, to bound each read by the overall deadline (None if hidden)."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _short(exc: BaseException) -> str:
    """The root cause in a few words: requests nests the socket error three exceptions deep."""
    root: BaseException = exc
    seen = 0
    while seen < 8 and (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
        seen += 1
    if isinstance(root, OSError) and root.strerror:
        return root.strerror.lower()
    text = str(root) or type(root).__name__
    return text if len(text) <= 200 else text[:197] + "..."
