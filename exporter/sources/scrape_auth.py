"""Per-target scrape credentials (`basic_auth`, `bearer_token_file`): the `Authorization` header.

The header is built for every request, redirects included, from files re-read only when they
change (inode, size or mtime): Kubernetes rotates projected tokens in place by swapping a
symlink, and a stale token would fail every scrape until a reload.

The files are read off the event loop, in a thread of their own, and at most one read per target
is in flight: a read that blocks (a hung network mount) costs that target its scrapes (each ends
at its own deadline), never the loop every other source is fetched on, and never more than one
thread however many rounds it stays hung.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import os

from exporter.settings import ScrapeAuth
from exporter.sources.base import SourceError
from exporter.sources.event_loop import in_daemon_thread

#: a token or password file is a few hundred bytes; this much is read at most
MAX_CREDENTIAL_BYTES = 64 * 1024


class ScrapeAuthorizer:
    """The `Authorization` value of one target's requests; SourceError when a file is unreadable."""

    def __init__(self, auth: ScrapeAuth) -> None:
        self._auth = auth
        self._files: dict[str, tuple[tuple[int, int, int], str]] = {}
        self._reading: concurrent.futures.Future[str] | None = None
        #: the file a read still in flight is reading, for the timeout's message
        self.reading_path: str | None = None

    async def header(self) -> str:
        """The header value for the next request, its files read (when changed) in a thread."""
        reading = self._reading
        if reading is None or reading.done():
            reading = self._reading = in_daemon_thread("credentials", self.header_now)
        # shielded: a fetch that gives up (its deadline) leaves the read to finish for the next one
        return await asyncio.shield(asyncio.wrap_future(reading))

    def header_now(self) -> str:
        """The header value, reading the files in this thread (blocking)."""
        auth = self._auth
        if auth.bearer_token_file is not None:
            return f"Bearer {self._read(auth.bearer_token_file)}"
        password = self._read(auth.password_file) if auth.password_file is not None else auth.password or ""
        return basic_auth_header(auth.username or "", password)

    def _read(self, path: str) -> str:
        """The file's text, stripped; read again only when its identity, size or mtime changed."""
        self.reading_path = path
        try:
            status = os.stat(path)
            stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
            cached = self._files.get(path)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            with open(path, encoding="utf-8") as handle:
                text = handle.read(MAX_CREDENTIAL_BYTES).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError("connection", f"cannot read the credentials file {path}: {exc}") from exc
        finally:
            self.reading_path = None
        self._files[path] = (stamp, text)
        return text


def basic_auth_header(username: str, password: str) -> str:
    """`Basic <base64>` of `username:password`, Latin-1 as browsers, curl and requests send it."""
    return "Basic " + base64.b64encode(f"{username}:{password}".encode("latin-1", "replace")).decode("ascii")


def authorizer(auth: ScrapeAuth) -> ScrapeAuthorizer | None:
    """The credentials of a target, or None when it has none."""
    return ScrapeAuthorizer(auth) if auth.bearer_token_file is not None or auth.username is not None else None
