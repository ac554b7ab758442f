"""TLS and basic auth for the HTTP server, from `--web.config.file` in the Prometheus
exporter-toolkit format (docs/web-configuration.md of prometheus/exporter-toolkit), so one file
serves node_exporter, dcgm-exporter and this exporter alike.

Supported: `tls_server_config` (cert_file/key_file or inline cert/key, client_ca_file or inline
client_ca, client_auth_type NoClientCert | VerifyClientCertIfGiven | RequireAndVerifyClientCert,
client_allowed_sans, min_version/max_version, prefer_server_cipher_suites), `http_server_config`
(headers; http2 is accepted, this server speaks HTTP/1.1), `basic_auth_users` (bcrypt hashes) and
`rate_limit`. Go-specific settings with no OpenSSL equivalent (non-empty `cipher_suites`,
`curve_preferences`) and the client-auth types that accept unverified certificates are refused with
the key named, rather than silently weakened.

As in exporter-toolkit, relative paths are relative to the web config file, the file (and the
certificates it names) are re-read when they change, so rotated certificates need no restart, and
a successful password check is cached so bcrypt's cost is paid once per credential.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import bcrypt

from exporter.config import ConfigError, load_file

log = logging.getLogger(__name__)

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH_TYPES = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Go accepts these without verifying the certificate; Python's ssl cannot, and they are not
# authentication anyway (exporter-toolkit's docs call every type but the last insecure).
UNVERIFIED_CLIENT_AUTH_TYPES = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")
TOP_KEYS = ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit")
TLS_KEYS = (
    "cert",
    "key",
    "client_ca",
    "cert_file",
    "key_file",
    "client_auth_type",
    "client_ca_file",
    "client_allowed_sans",
    "min_version",
    "max_version",
    "cipher_suites",
    "prefer_server_cipher_suites",
    "curve_preferences",
)
HTTP_KEYS = ("http2", "headers")
HEADER_VALUES: dict[str, tuple[str, ...] | None] = {  # None: any value
    "Content-Security-Policy": None,
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-Content-Type-Options": ("nosniff",),
    "X-XSS-Protection": None,
    "Strict-Transport-Security": None,
}
HANDSHAKE_TIMEOUT_SECONDS = 10.0
RELOAD_CHECK_SECONDS = 1.0
AUTH_CACHE_SIZE = 1024
# What Go's net/http answers to plain HTTP on a TLS port; the connection is then closed.
PLAIN_HTTP_REFUSAL = (
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
    b"\r\nClient sent an HTTP request to an HTTPS server.\n"
)
_BCRYPT_HASH = re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class TlsSettings:
    cert_file: str | None
    key_file: str | None
    cert_pem: str | None
    key_pem: str | None
    client_ca_file: str | None
    client_ca_pem: str | None
    verify_mode: ssl.VerifyMode
    allowed_sans: tuple[str, ...]
    min_version: ssl.TLSVersion
    max_version: ssl.TLSVersion
    prefer_server_ciphers: bool


@dataclass(frozen=True)
class WebConfig:
    tls: TlsSettings | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    rate_limit: tuple[float, int] | None = None  # (seconds per token, burst)

    def files(self) -> tuple[str, ...]:
        """The files whose change means a reload."""
        tls = self.tls
        return tuple(f for f in (tls.cert_file, tls.key_file, tls.client_ca_file) if f) if tls else ()


def load_web_config(path: str) -> WebConfig:
    return parse_web_config(load_file(path), os.path.dirname(os.path.abspath(path)), path)


def parse_web_config(data: Any, base_dir: str, where: str) -> WebConfig:
    """Validate the file's contents; errors name `<file>: <key>`."""

    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{where}: {key}", problem)

    _mapping(data, where, TOP_KEYS, fail, "")
    tls = _tls(data["tls_server_config"], base_dir, fail) if data.get("tls_server_config") else None
    http = data.get("http_server_config") or {}
    _mapping(http, "http_server_config", HTTP_KEYS, fail, "http_server_config.")
    if not isinstance(http.get("http2", True), bool):
        raise fail("http_server_config.http2", "must be true or false")
    headers = http.get("headers") or {}
    _mapping(headers, "http_server_config.headers", tuple(HEADER_VALUES), fail, "http_server_config.headers.")
    for name, value in headers.items():
        allowed = HEADER_VALUES[name]
        if not isinstance(value, str) or (allowed and value.lower() not in allowed):
            raise fail(
                f"http_server_config.headers.{name}",
                f"{value!r} is not allowed" + (f" (one of {', '.join(allowed)})" if allowed else ""),
            )
    users_value = data.get("basic_auth_users") or {}
    _mapping(users_value, "basic_auth_users", None, fail, "basic_auth_users.")
    users = {}
    for user, hashed in users_value.items():
        if not isinstance(hashed, str) or not _BCRYPT_HASH.fullmatch(hashed):
            raise fail(
                f"basic_auth_users.{user}",
                "not a bcrypt hash ($2a$/$2b$/$2y$, 60 characters); "
                "make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
            )
        users[str(user)] = hashed.encode()
    return WebConfig(
        tls, users, {str(k): str(v) for k, v in headers.items()}, _rate_limit(data.get("rate_limit"), fail)
    )


def _mapping(value: Any, name: str, known: tuple[str, ...] | None, fail: Any, prefix: str) -> None:
    if not isinstance(value, dict):
        raise fail(name, "must be a mapping")
    for key in value:
        if known is not None and key not in known:
            raise fail(f"{prefix}{key}", f"unknown key (known: {', '.join(known)})")


def _tls(value: Any, base_dir: str, fail: Any) -> TlsSettings:
    _mapping(value, "tls_server_config", TLS_KEYS, fail, "tls_server_config.")
    key = "tls_server_config."

    def text(name: str) -> str | None:
        item = value.get(name)
        if item is not None and (not isinstance(item, str) or not item):
            raise fail(key + name, "must be a non-empty string")
        return item

    def path(name: str) -> str | None:
        item = text(name)
        return None if item is None else os.path.join(base_dir, item)

    cert_file, key_file, ca_file = path("cert_file"), path("key_file"), path("client_ca_file")
    cert_pem, key_pem, ca_pem = text("cert"), text("key"), text("client_ca")
    for inline, file_key in ((cert_pem, "cert_file"), (key_pem, "key_file"), (ca_pem, "client_ca_file")):
        if inline and value.get(file_key):
            raise fail(key + file_key, f"set either {file_key} or the inline {file_key[:-5]}, not both")
    if not (cert_file or cert_pem):
        raise fail(key + "cert_file", "missing (a certificate is required for TLS)")
    if not (key_file or key_pem):
        raise fail(key + "key_file", "missing (a private key is required for TLS)")
    auth_type = value.get("client_auth_type") or "NoClientCert"
    if auth_type in UNVERIFIED_CLIENT_AUTH_TYPES:
        raise fail(
            key + "client_auth_type",
            f"{auth_type} accepts certificates it does not verify and is not "
            "supported; use RequireAndVerifyClientCert (or VerifyClientCertIfGiven)",
        )
    if auth_type not in CLIENT_AUTH_TYPES:
        raise fail(key + "client_auth_type", f"{auth_type!r} is not one of {', '.join(CLIENT_AUTH_TYPES)}")
    verify_mode = CLIENT_AUTH_TYPES[auth_type]
    if verify_mode != ssl.CERT_NONE and not (ca_file or ca_pem):
        raise fail(key + "client_ca_file", f"required by client_auth_type {auth_type}")
    if verify_mode == ssl.CERT_NONE and (ca_file or ca_pem):
        raise fail(
            key + "client_auth_type",
            "client CAs are configured without a client auth policy (set RequireAndVerifyClientCert)",
        )
    sans = value.get("client_allowed_sans") or []
    if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
        raise fail(key + "client_allowed_sans", "must be a list of strings")
    if sans and verify_mode != ssl.CERT_REQUIRED:
        raise fail(key + "client_allowed_sans", "needs client_auth_type RequireAndVerifyClientCert")
    versions = {}
    for name, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        versions[name] = value.get(name) or default
        if versions[name] not in TLS_VERSIONS:
            raise fail(key + name, f"{versions[name]!r} is not one of {', '.join(TLS_VERSIONS)}")
    if TLS_VERSIONS[versions["min_version"]] > TLS_VERSIONS[versions["max_version"]]:
        raise fail(key + "min_version", "is above max_version")
    for name in ("cipher_suites", "curve_preferences"):
        if value.get(name):
            raise fail(
                key + name,
                "Go names with no OpenSSL equivalent here; not supported (remove it to use OpenSSL's defaults)",
            )
    prefer = value.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise fail(key + "prefer_server_cipher_suites", "must be true or false")
    return TlsSettings(
        cert_file,
        key_file,
        cert_pem,
        key_pem,
        ca_file,
        ca_pem,
        verify_mode,
        tuple(sans),
        TLS_VERSIONS[versions["min_version"]],
        TLS_VERSIONS[versions["max_version"]],
        prefer,
    )


def _rate_limit(value: Any, fail: Any) -> tuple[float, int] | None:
    if value is None:
        return None
    _mapping(value, "rate_limit", ("interval", "burst"), fail, "rate_limit.")
    interval = _duration(value.get("interval", "0s"), "rate_limit.interval", fail)
    burst = value.get("burst", 0)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        raise fail("rate_limit.burst", "must be a whole number, 0 or more")
    return (interval, max(1, burst)) if interval > 0 else None


def _duration(value: Any, key: str, fail: Any) -> float:
    text = str(value)
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise fail(key, f"{text!r} is not a duration such as 1s or 500ms")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def build_ssl_context(tls: TlsSettings, where: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = tls.min_version, tls.max_version
    if tls.prefer_server_ciphers:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        if tls.cert_pem or tls.key_pem:
            _load_inline_chain(context, tls)
        else:
            context.load_cert_chain(tls.cert_file, tls.key_file)  # type: ignore[arg-type]
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"{where}: tls_server_config.cert_file", f"cannot load the certificate and key: {exc}"
        ) from exc
    if tls.verify_mode != ssl.CERT_NONE:
        try:
            context.load_verify_locations(cafile=tls.client_ca_file, cadata=tls.client_ca_pem)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{where}: tls_server_config.client_ca_file", f"cannot load the client CA: {exc}"
            ) from exc
        context.verify_mode = tls.verify_mode
    return context


def _load_inline_chain(context: ssl.SSLContext, tls: TlsSettings) -> None:
    """ssl loads certificates only from files: inline PEM goes through private temporary ones."""
    temporary: list[str] = []

    def as_file(pem: str | None, path: str | None) -> str | None:
        if not pem:
            return path
        fd, temp_path = tempfile.mkstemp(prefix="web-config-", suffix=".pem")  # mode 0600
        temporary.append(temp_path)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(pem)
        return temp_path

    try:
        context.load_cert_chain(as_file(tls.cert_pem, tls.cert_file), as_file(tls.key_pem, tls.key_file))  # type: ignore[arg-type]
    finally:
        for temp_path in temporary:
            os.unlink(temp_path)


class WebGuard:
    """What the HTTP server asks: wrap this connection in TLS? may this request through?"""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._config, self._context = self._load()
        self.tls_enabled = self._config.tls is not None
        self._stamps = self._file_stamps()
        self._checked = time.monotonic()
        self._auth_cache: dict[bytes, None] = {}
        self._tokens = float(self._config.rate_limit[1]) if self._config.rate_limit else 0.0
        self._tokens_at = time.monotonic()
        self._dummy_hash: bytes | None = None

    def _load(self) -> tuple[WebConfig, ssl.SSLContext | None]:
        config = load_web_config(self.path)
        return config, build_ssl_context(config.tls, self.path) if config.tls else None

    def _file_stamps(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in (self.path, *self._config.files()):
            try:
                stat = os.stat(path)
                stamps.append((stat.st_mtime_ns, stat.st_size))
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
                log.error("web config: keeping the previous configuration: %s", exc)
                return
            if (config.tls is not None) != self.tls_enabled:
                log.error(
                    "web config: %s turns TLS %s; restart to change that, keeping the previous configuration",
                    self.path,
                    "on" if config.tls else "off",
                )
                return
            log.info("web config: reloaded %s", self.path)
            self._config, self._context = config, context
            self._auth_cache.clear()
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
        wrapped.settimeout(None)
        return wrapped

    def refusal(self, authorization: str | None) -> tuple[int, dict[str, str], bytes] | None:
        """None when the request may proceed; else (status, headers, body) to answer with."""
        self._refresh()
        config = self._config
        if config.rate_limit and not self._take_token(*config.rate_limit):
            return 429, {}, b"too many requests\n"
        if config.users and not self._authorized(authorization, config.users):
            return 401, {"WWW-Authenticate": 'Basic realm="llm-bottleneck-exporter"'}, b"unauthorized\n"
        return None

    def headers(self) -> Mapping[str, str]:
        return self._config.headers

    def _take_token(self, seconds_per_token: float, burst: int) -> bool:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(float(burst), self._tokens + (now - self._tokens_at) / seconds_per_token)
            self._tokens_at = now
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True

    def _authorized(self, authorization: str | None, users: Mapping[str, bytes]) -> bool:
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not sep:
            return False
        hashed = users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), password.encode(), hashed or b""))).digest()
        if hashed is not None and key in self._auth_cache:
            return True
        try:
            # An unknown user costs a bcrypt check too, so timing does not tell which users exist.
            ok = bcrypt.checkpw(password.encode(), hashed or self._dummy()) and hashed is not None
        except ValueError:  # bcrypt >= 5 refuses passwords over 72 bytes; so does Go's
            return False
        if ok:
            with self._lock:
                if len(self._auth_cache) >= AUTH_CACHE_SIZE:
                    self._auth_cache.pop(next(iter(self._auth_cache)))
                self._auth_cache[key] = None
        return ok

    def _dummy(self) -> bytes:
        if self._dummy_hash is None:
            self._dummy_hash = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(rounds=10))
        return self._dummy_hash


def _san_allowed(cert: Mapping[str, Any], allowed: tuple[str, ...]) -> bool:
    names = {value for _kind, value in cert.get("subjectAltName", ())}
    return any(name in names for name in allowed)
