"""What the HTTP client takes from the environment and the configuration beside the URL: the
proxy for a URL (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY, as curl and requests read them,
CIDR ranges in NO_PROXY included), ~/.netrc credentials, and TLS options as a Prometheus scrape
config states them. Read when a client is made: a daemon's environment does not change under it.
"""

from __future__ import annotations

import ipaddress
import netrc
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit


def proxy_for(url: str, proxies: Mapping[str, str]) -> str | None:
    """The proxy `proxies` (urllib.request.getproxies(): the environment's) name for `url`, or
    None (none named, or NO_PROXY matches)."""
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme.lower()) or proxies.get("all")
    if not proxy or _bypassed(parts.hostname or "", parts.port, proxies.get("no", "")):
        return None
    return proxy


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether NO_PROXY names `host`: `*`, the host or a domain it is in (`.svc`, `svc`), with an
    optional port, or an address range (`10.0.0.0/8`: Kubernetes pod networks are given so)."""
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if entry == "*":
            return True
        if not entry:
            continue
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, entry_port = entry, ""
        if entry.startswith("["):  # [v6]:port
            name, _, rest = entry[1:].partition("]")
            entry_port = rest.removeprefix(":")
        elif entry.count(":") == 1:
            name, _, entry_port = entry.partition(":")
        if entry_port and str(port) != entry_port:
            continue
        name = name.lstrip(".")
        if host.lower() == name or host.lower().endswith("." + name):
            return True
    return False


def netrc_entries() -> netrc.netrc | None:
    """$NETRC, else ~/.netrc, parsed; None when there is none or it does not parse."""
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    try:
        return netrc.netrc(path) if os.path.isfile(path) else None
    except (OSError, netrc.NetrcParseError):
        return None


@dataclass(frozen=True)
class TlsOptions:
    """How an https server is verified and what we present: as a Prometheus scrape config says it."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False

    def context(self) -> ssl.SSLContext | bool:
        """aiohttp's `ssl`: True for the system's default verification."""
        if not (self.ca_file or self.cert_file or self.insecure_skip_verify):
            return True
        context = ssl.create_default_context(cafile=self.ca_file)
        if self.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        return context
