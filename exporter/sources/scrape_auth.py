"""Per-target scrape credentials (`basic_auth`, `bearer_token_file`) as a requests auth hook.

The header is built for every request, redirects included, from files re-read only when they
change (inode, size or mtime): Kubernetes rotates projected tokens in place by swapping a
symlink, and a stale token would fail every scrape until a reload.
"""

from __future__ import annotations

import os

import requests
from requests.auth import AuthBase, _basic_auth_str

from exporter.settings import ScrapeAuth
from exporter.sources.base import SourceError


class ScrapeAuthorizer(AuthBase):
    """Adds `Authorization` to each request of one target; SourceError when a file is unreadable."""

    def __init__(self, auth: ScrapeAuth) -> None:
        self._auth = auth
        self._files: dict[str, tuple[tuple[int, int, int], str]] = {}

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        auth = self._auth
        if auth.bearer_token_file is not None:
            request.headers["Authorization"] = f"Bearer {self._read(auth.bearer_token_file)}"
        elif auth.username is not None:
            password = self._read(auth.password_file) if auth.password_file is not None else auth.password or ""
            request.headers["Authorization"] = _basic_auth_str(auth.username, password)
        return request

    def _read(self, path: str) -> str:
        """The file's text, stripped; read again only when its identity, size or mtime changed."""
        try:
            status = os.stat(path)
            stamp = (status.st_ino, status.st_size, status.st_mtime_ns)
            cached = self._files.get(path)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            with open(path, encoding="utf-8") as handle:
                text = handle.read(64 * 1024).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError("connection", f"cannot read the credentials file {path}: {exc}") from exc
        self._files[path] = (stamp, text)
        return text


def authorizer(auth: ScrapeAuth) -> ScrapeAuthorizer | None:
    """The hook for a target's credentials, or None when it has none."""
    return ScrapeAuthorizer(auth) if auth.bearer_token_file is not None or auth.username is not None else None
