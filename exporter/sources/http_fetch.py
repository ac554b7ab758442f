"""Bounded HTTP GET for scraping: time and size limits enforced while the body streams in.

`requests`' read timeout applies to each socket read, so a server that trickles a byte a second
would never time out, and a 100 MB body would be held in memory whole; both are stopped here.
Decompressed bytes are counted, so a gzip bomb hits the same cap.
"""

from __future__ import annotations

import time

import requests

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
        try:
            for chunk in response.iter_content(chunk_size=65536):
                size += len(chunk)
                if size > max_bytes:
                    raise SourceError("too_large", f"{url}: body exceeds the {max_bytes}-byte cap")
                if time.monotonic() > deadline:
                    raise SourceError("timeout", f"{url}: body not complete within {timeout_seconds:g}s")
                chunks.append(chunk)
        except requests.exceptions.ConnectionError as exc:
            # requests wraps a socket read timeout during streaming as ConnectionError.
            reason = "timeout" if "timed out" in str(exc).lower() else "connection"
            raise SourceError(reason, f"{url}: {_short(exc)}") from exc
        except requests.RequestException as exc:
            raise SourceError("connection", f"{url}: {_short(exc)}") from exc
        content_type = response.headers.get("Content-Type", "")
    return b"".join(chunks).decode("utf-8", errors="replace"), content_type


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
