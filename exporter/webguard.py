"""What the HTTP server asks of the web config: wrap this connection in TLS? may this request
through? Re-reads the file (and the certificates it names) when they change, as exporter-toolkit
does, so rotated certificates need no restart.

Reloads fail closed: a file that is empty, invalid, or that would turn TLS or basic auth off keeps
the configuration in effect (logged as an error); turning protection off takes a restart.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import stat
import threading
import time
from collections.abc import Mapping
from typing import Any

from exporter.validation import ConfigError
from exporter.webauth import BasicAuth, RateLimit, Verdict
from exporter.webconfig import WebConfig, build_ssl_context, load_web_config

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_SECONDS = 10.0
RELOAD_CHECK_SECONDS = 1.0
# What Go's net/http answers to plain HTTP on a TLS port; the connection is then closed.
PLAIN_HTTP_REFUSAL = (
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
    b"\r\nClient sent an HTTP request to an HTTPS server.\n"
)
Refusal = tuple[int, dict[str, str], bytes]
UNAUTHORIZED: Refusal = (401, {"WWW-Authenticate": 'Basic realm="llm-bottleneck-exporter"'}, b"unauthorized\n")
TOO_MANY_REQUESTS: Refusal = (429, {"Retry-After": "1"}, b"too many requests\n")


class WebGuard:
    """TLS, basic auth, response headers and the rate limit of one `--web.config.file`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._config, self._context = self._load()
        self.tls_enabled = self._config.tls is not None
        self._stamps = self._file_stamps()
        self._checked = time.monotonic()
        self._auth = BasicAuth()
        self._rate = _rate_limit(self._config)

    def _load(self) -> tuple[WebConfig, ssl.SSLContext | None]:
        config = load_web_config(self.path)
        for warning in config.warnings:
            log.warning("web config: %s: %s", self.path, warning)
        if config.tls is None:
            return config, None
        context = build_ssl_context(config.tls, self.path)
        _warn_if_exposed(config.tls.key_file)
        return config, context

    def _file_stamps(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in (self.path, *self._config.files()):
            try:
                stat_result = os.stat(path)
                stamps.append((stat_result.st_mtime_ns, stat_result.st_size))
            except OSError:
                stamps.append((-1, -1))
        return tuple(stamps)

    def _refresh(self) -> None:
        """Re-read the file and its certificates when they changed; a bad new one keeps the old."""
        now = time.monotonic()
        with self._lock:
            if now - self._checked < RELOAD_CHECK_SECONDS:
                return
            self._checked = now
            stamps = self._file_stamps()
            if stamps == self._stamps:
                return
            self._stamps = stamps
            try:
                config, context = self._load()
            except ConfigError as exc:
                log.error("web config: keeping the configuration in effect: %s", exc)
                return
            weakened = _weakening(self._config, config)
            if weakened:
                log.error(
                    "web config: %s %s; restart to do that, keeping the configuration in effect", self.path, weakened
                )
                return
            log.info("web config: reloaded %s", self.path)
            if (config.rate_limit, bool(config.users)) != (self._config.rate_limit, bool(self._config.users)):
                self._rate = _rate_limit(config)
            self._config, self._context = config, context
            self._stamps = self._file_stamps()

    def wrap(self, sock: socket.socket) -> ssl.SSLSocket | None:
        """The connection after a TLS handshake, or None when it was refused (and closed)."""
        self._refresh()
        context, tls = self._context, self._config.tls
        assert context is not None and tls is not None
        sock.settimeout(HANDSHAKE_TIMEOUT_SECONDS)
        try:
            first = sock.recv(1, socket.MSG_PEEK)
            if first and first[0] != 0x16:  # not a TLS handshake record: plain HTTP, most likely
                sock.sendall(PLAIN_HTTP_REFUSAL)
                return None
            wrapped = context.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError) as exc:
            log.debug("TLS handshake failed: %s", exc)
            return None
        if tls.allowed_sans and not _san_allowed(wrapped.getpeercert() or {}, tls.allowed_sans):
            log.warning("TLS client certificate has none of the allowed SANs; connection closed")
            wrapped.close()
            return None
        return wrapped

    def refusal(self, authorization: str | None, client: str) -> Refusal | None:
        """None when the request may proceed; else (status, headers, body) to answer with.

        Auth comes first, so only requests that passed it spend the configured rate limit;
        failures are throttled per client address (`client`), without running bcrypt. Without
        basic auth, the rate limit is per client address too (RateLimit).
        """
        self._refresh()
        users = self._config.users
        if users:
            verdict = self._auth.check(authorization, users, client)
            if verdict is Verdict.THROTTLED:
                return TOO_MANY_REQUESTS
            if verdict is Verdict.DENIED:
                return UNAUTHORIZED
        rate = self._rate
        if rate is not None:
            with self._lock:
                if not rate.take(client):
                    return TOO_MANY_REQUESTS
        return None

    def headers(self) -> Mapping[str, str]:
        return self._config.headers


def _rate_limit(config: WebConfig) -> RateLimit | None:
    if not config.rate_limit:
        return None
    return RateLimit(*config.rate_limit, per_client=not config.users)


def _weakening(current: WebConfig, new: WebConfig) -> str | None:
    """What `new` would switch off that `current` has, which a reload must not do."""
    if (new.tls is None) != (current.tls is None):
        return "turns TLS " + ("on" if new.tls else "off")
    if current.users and not new.users:
        return "turns basic auth off"
    return None


def _warn_if_exposed(key_file: str | None) -> None:
    """A private key other users can read is as good as published; say so (it still loads)."""
    if key_file is None:
        return
    try:
        mode = stat.S_IMODE(os.stat(key_file).st_mode)
    except OSError:
        return
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning(
            "web config: TLS key file %s is readable by group or others (mode %04o); chmod 600 it", key_file, mode
        )


def _san_allowed(cert: Mapping[str, Any], allowed: tuple[str, ...]) -> bool:
    names = {value for _kind, value in cert.get("subjectAltName", ())}
    return any(name in names for name in allowed)
