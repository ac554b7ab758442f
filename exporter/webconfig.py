"""The `--web.config.file` format: TLS, basic auth, response headers and a rate limit, as in the
Prometheus exporter-toolkit (docs/web-configuration.md of prometheus/exporter-toolkit), so one
file serves node_exporter, dcgm-exporter and this exporter alike. This module validates the file
and builds the TLS context; exporter.webguard applies it to connections and requests.

Supported: `tls_server_config` (cert_file/key_file or inline cert/key, client_ca_file or inline
client_ca, client_auth_type NoClientCert | VerifyClientCertIfGiven | RequireAndVerifyClientCert,
client_allowed_sans, min_version/max_version, prefer_server_cipher_suites), `http_server_config`
(headers; http2 is accepted, this server speaks HTTP/1.1), `basic_auth_users` (bcrypt hashes) and
`rate_limit`. Go-specific settings with no OpenSSL equivalent (non-empty `cipher_suites`,
`curve_preferences`) and the client-auth types that accept unverified certificates are refused with
the key named, rather than silently weakened. So are the inputs that would weaken the server
quietly: an empty file (it would mean no auth), bcrypt costs outside 4..16, and header values
with control characters (a CR/LF would inject headers). Relative paths are relative to the file.

Sections present but empty: exporter-toolkit reads an empty `tls_server_config` as "TLS is
disabled" (logged at info) and an empty `basic_auth_users` as no auth, and so does this module,
with a warning rather than an info line; a file whose empty sections leave it with neither TLS
nor basic auth is refused, since it can only have meant to protect the server. A bcrypt cost
above 12 is warned about: every new credential then costs a large share of the bcrypt budget
(exporter.webauth), and a right password may wait seconds for its first check.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exporter import validation as v
from exporter.validation import ConfigError, load_file

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
#: bcrypt's own floor is 4; above 16 one check takes seconds of CPU (each step doubles it), which
#: turns every cache miss, and every unknown user's dummy check, into a denial of service.
BCRYPT_COSTS = range(4, 17)
#: costs above this are accepted with a warning (each step doubles a check's CPU; 10 is the usual)
BCRYPT_COST_WARNING = 12
#: the sections that protect the server; present and empty, they protect nothing
PROTECTING_SECTIONS = ("tls_server_config", "basic_auth_users")
_BCRYPT_HASH = re.compile(r"\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}")
# Visible ASCII, space and tab: what a header value may hold without ending the header line.
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
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
    #: what the file leaves weaker than it may look (logged at warning on every load)
    warnings: tuple[str, ...] = ()

    def files(self) -> tuple[str, ...]:
        """The files whose change means a reload."""
        tls = self.tls
        return tuple(f for f in (tls.cert_file, tls.key_file, tls.client_ca_file) if f) if tls else ()


def bcrypt_cost(hashed: bytes) -> int:
    """The cost of a hash that passed validation (`$2b$10$...`)."""
    return int(hashed[4:6])


def load_web_config(path: str) -> WebConfig:
    """The file's settings; every error is one ConfigError `FILE: key: problem`."""
    data = load_file(path)
    if not data:
        # Fail closed: a truncated file must not read as "no TLS, no auth".
        raise ConfigError(path, "empty; remove --web.config.file to serve plain HTTP without auth")
    return parse_web_config(data, os.path.dirname(os.path.abspath(path)), path)


def parse_web_config(data: Any, base_dir: str, where: str) -> WebConfig:
    """Validate the file's contents; errors name `<where>: <key>`."""
    try:
        return _web_config(data, base_dir)
    except ConfigError as exc:
        problem = str(exc)[len(exc.where) + 2 :]
        raise ConfigError(f"{where}: {exc.where}", problem) from exc


def _web_config(data: Any, base_dir: str) -> WebConfig:
    v.known_keys(v.mapping(data, "web config"), "", TOP_KEYS)
    tls = _tls(data["tls_server_config"], base_dir) if data.get("tls_server_config") else None
    http = v.section(data.get("http_server_config") or {}, "http_server_config", HTTP_KEYS)
    v.boolean(http.get("http2", True), "http_server_config.http2")
    users = _users(data.get("basic_auth_users") or {})
    empty = [key for key in PROTECTING_SECTIONS if key in data and not data[key]]
    if empty and tls is None and not users:
        raise ConfigError(
            empty[0],
            "empty, and nothing else in the file turns TLS or basic auth on: the server would be open "
            "(plain HTTP, no auth); fill it in, or remove the key to serve that way knowingly",
        )
    off = {"tls_server_config": "TLS is off: plain HTTP", "basic_auth_users": "basic auth is off"}
    warnings = [f"{key} is empty, so {off[key]} (as exporter-toolkit reads it)" for key in empty]
    warnings += [
        f"basic_auth_users.{user}: bcrypt cost {bcrypt_cost(hashed)} makes every new credential's check take "
        f"about {0.05 * 2 ** (bcrypt_cost(hashed) - 10):.1f} s of CPU; 10 to {BCRYPT_COST_WARNING} is usual"
        for user, hashed in users.items()
        if bcrypt_cost(hashed) > BCRYPT_COST_WARNING
    ]
    return WebConfig(
        tls, users, _headers(http.get("headers") or {}), _rate_limit(data.get("rate_limit")), tuple(warnings)
    )


def _headers(value: Any) -> dict[str, str]:
    where = "http_server_config.headers"
    headers = v.section(value, where, tuple(HEADER_VALUES))
    for name, text in headers.items():
        at, allowed = f"{where}.{name}", HEADER_VALUES[name]
        if not isinstance(text, str) or not _HEADER_VALUE.fullmatch(text):
            raise ConfigError(at, f"{text!r} is not allowed (visible ASCII only: a CR or LF would inject headers)")
        if allowed and text.lower() not in allowed:
            raise ConfigError(at, f"{text!r} is not allowed (one of {', '.join(allowed)})")
    return dict(headers)


def _users(value: Any) -> dict[str, bytes]:
    users = {}
    for user, hashed in v.mapping(value, "basic_auth_users").items():
        at = f"basic_auth_users.{user}"
        match = _BCRYPT_HASH.fullmatch(hashed) if isinstance(hashed, str) else None
        if match is None:
            raise ConfigError(
                at,
                "not a bcrypt hash ($2a$/$2b$/$2y$, 60 characters); "
                "make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
            )
        if int(match.group(1)) not in BCRYPT_COSTS:
            raise ConfigError(
                at,
                f"bcrypt cost {match.group(1)} is out of range {BCRYPT_COSTS.start}..{BCRYPT_COSTS.stop - 1} "
                "(10 to 12 is usual; make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)",
            )
        users[str(user)] = hashed.encode()
    return users


def _tls(value: Any, base_dir: str) -> TlsSettings:
    key = "tls_server_config."
    settings = v.section(value, "tls_server_config", TLS_KEYS)

    def path(name: str) -> str | None:
        item = v.optional_string(settings.get(name), key + name)
        return None if item is None else os.path.join(base_dir, item)

    cert_file, key_file, ca_file = path("cert_file"), path("key_file"), path("client_ca_file")
    cert_pem, key_pem, ca_pem = (v.optional_string(settings.get(n), key + n) for n in ("cert", "key", "client_ca"))
    for inline, file_key in ((cert_pem, "cert_file"), (key_pem, "key_file"), (ca_pem, "client_ca_file")):
        if inline and settings.get(file_key):
            raise ConfigError(key + file_key, f"set either {file_key} or the inline {file_key[:-5]}, not both")
    if not (cert_file or cert_pem):
        raise ConfigError(key + "cert_file", "missing (a certificate is required for TLS)")
    if not (key_file or key_pem):
        raise ConfigError(key + "key_file", "missing (a private key is required for TLS)")
    auth_type = settings.get("client_auth_type") or "NoClientCert"
    if auth_type in UNVERIFIED_CLIENT_AUTH_TYPES:
        raise ConfigError(
            key + "client_auth_type",
            f"{auth_type} accepts certificates it does not verify and is not "
            "supported; use RequireAndVerifyClientCert (or VerifyClientCertIfGiven)",
        )
    verify_mode = CLIENT_AUTH_TYPES[v.choice(auth_type, key + "client_auth_type", tuple(CLIENT_AUTH_TYPES))]
    if verify_mode != ssl.CERT_NONE and not (ca_file or ca_pem):
        raise ConfigError(key + "client_ca_file", f"required by client_auth_type {auth_type}")
    if verify_mode == ssl.CERT_NONE and (ca_file or ca_pem):
        raise ConfigError(
            key + "client_auth_type",
            "client CAs are configured without a client auth policy (set RequireAndVerifyClientCert)",
        )
    sans = settings.get("client_allowed_sans") or []
    if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
        raise ConfigError(key + "client_allowed_sans", "must be a list of strings")
    if sans and verify_mode != ssl.CERT_REQUIRED:
        raise ConfigError(key + "client_allowed_sans", "needs client_auth_type RequireAndVerifyClientCert")
    minimum, maximum = (
        TLS_VERSIONS[v.choice(settings.get(name) or default, key + name, tuple(TLS_VERSIONS))]
        for name, default in (("min_version", "TLS12"), ("max_version", "TLS13"))
    )
    if minimum > maximum:
        raise ConfigError(key + "min_version", "is above max_version")
    for name in ("cipher_suites", "curve_preferences"):
        if settings.get(name):
            raise ConfigError(
                key + name,
                "Go names with no OpenSSL equivalent here; not supported (remove it to use OpenSSL's defaults)",
            )
    prefer = v.boolean(settings.get("prefer_server_cipher_suites", True), key + "prefer_server_cipher_suites")
    return TlsSettings(
        cert_file, key_file, cert_pem, key_pem, ca_file, ca_pem, verify_mode, tuple(sans), minimum, maximum, prefer
    )


def _rate_limit(value: Any) -> tuple[float, int] | None:
    if value is None:
        return None
    settings = v.section(value, "rate_limit", ("interval", "burst"))
    interval = _duration(settings.get("interval", "0s"), "rate_limit.interval")
    burst = settings.get("burst", 0)
    if isinstance(burst, bool) or not isinstance(burst, int) or burst < 0:
        raise ConfigError("rate_limit.burst", "must be a whole number, 0 or more")
    return (interval, max(1, burst)) if interval > 0 else None


def _duration(value: Any, where: str) -> float:
    """A Go duration (exporter-toolkit's format: 500ms, 1.5s, 1m), in seconds."""
    text = str(value)
    if text == "0":
        return 0.0
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ConfigError(where, f"{text!r} is not a duration such as 1s or 500ms")
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
