"""The scrape targets of the configuration: `engines:`, `gateways:` and `probes:` (and their
`--engine` / `--gateway` flags), each entry's URL, credentials and scrape limits.

Split from exporter/config.py, which builds the whole Config and calls these; the same rules hold:
every user error is a ConfigError naming the key (`engines[1].url`) or the flag.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from exporter import validation as v
from exporter.settings import (
    ENGINE_ROLES,
    SLICE_DIMENSIONS,
    EngineTarget,
    GatewayTarget,
    PlannerTarget,
    ProbeTarget,
    ScrapeAuth,
    ScrapeLimits,
    field_names,
)
from exporter.sources.engines import MAPPINGS as ENGINES
from exporter.sources.gateways import MAPPINGS as GATEWAYS
from exporter.validation import ConfigError

ENGINE_KEYS = (
    "url",
    "rank_urls",
    "type",
    "name",
    "model",
    "role",
    "basic_auth",
    "bearer_token_file",
    *field_names(ScrapeLimits),
)
#: a multi-node engine has a listener per node or data-parallel group: a few dozen at most
MAX_RANK_URLS = 64
BASIC_AUTH_KEYS = ("username", "password", "password_file")
GATEWAY_KEYS = (
    "url",
    "type",
    "name",
    "engines",
    "access_log",
    "basic_auth",
    "bearer_token_file",
    *field_names(ScrapeLimits),
)
PLANNER_KEYS = ("url", "name", "model", "basic_auth", "bearer_token_file", *field_names(ScrapeLimits))
#: gateways whose access log the exporter can read (exporter/sources/access_log.py)
ACCESS_LOG_TYPES = ("haproxy",)
PROBE_KEYS = field_names(ProbeTarget)
#: a probe more often than every 5 s is load, not a measurement; one longer than 10 min is a typo
MIN_PROBE_INTERVAL_SECONDS = 5.0
MAX_PROBE_TOKENS = 256
MAX_PROBE_INTERVAL_SECONDS = 3600.0
#: a scrape deadline under 10 ms cannot cover a TCP connect; one past 10 min is a typo (the scrape
#: is bounded by the interval anyway)
MIN_TIMEOUT_SECONDS = 0.01
MAX_TIMEOUT_SECONDS = 600.0
MAX_RESPONSE_BYTES = 1024 * 1024 * 1024
MAX_SERIES = 10_000_000
MAX_LABEL_VALUE_LENGTH = 1024 * 1024
#: slices are for the few tenants, adapters and priority classes a dashboard can show; past a
#: hundred a dimension is an identifier (a user, a request), which belongs in traces
MAX_SLICES_PER_DIMENSION = 100


def limits(value: Any, where: str, base: ScrapeLimits) -> ScrapeLimits:
    v.section(value, where, field_names(ScrapeLimits))
    merged = {name: value.get(name, getattr(base, name)) for name in field_names(ScrapeLimits)}
    return _checked_limits(merged, where, base)


def _checked_limits(values: Mapping[str, Any], where: str, base: ScrapeLimits) -> ScrapeLimits:
    return ScrapeLimits(
        timeout_seconds=v.number(
            values["timeout_seconds"], f"{where}.timeout_seconds", MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS
        ),
        max_response_bytes=v.positive_int(
            values["max_response_bytes"], f"{where}.max_response_bytes", MAX_RESPONSE_BYTES
        ),
        max_series=v.positive_int(values["max_series"], f"{where}.max_series", MAX_SERIES),
        max_label_value_length=v.positive_int(
            values["max_label_value_length"], f"{where}.max_label_value_length", MAX_LABEL_VALUE_LENGTH
        ),
        max_models=v.positive_int(values["max_models"], f"{where}.max_models", MAX_SERIES),
        max_exported_series=v.positive_int(values["max_exported_series"], f"{where}.max_exported_series", MAX_SERIES),
        slice_labels=_slice_labels(values["slice_labels"], f"{where}.slice_labels", base),
        max_slices_per_dimension=v.integer(
            values["max_slices_per_dimension"], f"{where}.max_slices_per_dimension", 0, MAX_SLICES_PER_DIMENSION
        ),
    )


def _slice_labels(value: Any, where: str, base: ScrapeLimits) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`slice_labels: {tenant: [team_alias, ...], adapter: [...], priority: [...]}`: a dimension
    left out keeps the labels it has in `engine_defaults` (else the built-in ones), one given `[]`
    is not sliced."""
    if isinstance(value, tuple):  # the defaults', already in its settled form
        return value
    v.section(value, where, SLICE_DIMENSIONS)
    defaults = dict(base.slice_labels)
    settled = []
    for dimension in SLICE_DIMENSIONS:
        names = value.get(dimension, defaults[dimension])
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"{where}.{dimension}", "must be a list of label names")
        settled.append((dimension, tuple(names)))
    return tuple(settled)


def parse_engine_flag(text: str) -> dict[str, Any]:
    """`--engine [TYPE=]URL` into an engine entry."""
    return _target_flag(text, "--engine", "engine", ENGINES.names())


def parse_gateway_flag(text: str) -> dict[str, Any]:
    """`--gateway [TYPE=]URL` into a gateway entry."""
    return _target_flag(text, "--gateway", "gateway", GATEWAYS.names())


def _target_flag(text: str, flag: str, what: str, types: Sequence[str]) -> dict[str, Any]:
    prefix, sep, rest = text.partition("=")
    if sep and prefix in types:
        return {"type": prefix, "url": rest}
    if sep and "/" not in prefix and ":" not in prefix:
        raise ConfigError(flag, f"unknown {what} type {prefix!r} (known: {', '.join(types)})")
    return {"url": text}


def engines(value: Any, where: str, defaults: ScrapeLimits) -> tuple[EngineTarget, ...]:
    entries = []
    for at, item, entry in _scrape_targets(value, where, "--engine", ENGINE_KEYS, ENGINES.names(), defaults):
        entry["model"] = v.optional_string(item.get("model"), f"{at}.model")
        entry["role"] = None if item.get("role") is None else v.choice(item["role"], f"{at}.role", ENGINE_ROLES)
        entry["rank_urls"] = _rank_urls(item.get("rank_urls", []), f"{at}.rank_urls", entry["url"])
        entries.append(entry)
    names = _unique_names(entries, where, "engine")
    return tuple(
        EngineTarget(
            url=e["url"],
            name=name,
            type=e["type"],
            model=e["model"],
            limits=e["limits"],
            auth=e["auth"],
            role=e["role"],
            rank_urls=e["rank_urls"],
        )
        for e, name in zip(entries, names)
    )


def _rank_urls(value: Any, where: str, first: str) -> tuple[str, ...]:
    """The endpoints of the engine's other ranks or nodes: URLs as `url` is, each once."""
    found = tuple(url(item, f"{where}[{i}]") for i, item in enumerate(v.sequence(value, where)))
    if len(found) > MAX_RANK_URLS:
        raise ConfigError(where, f"at most {MAX_RANK_URLS} URLs, not {len(found)}")
    for i, item in enumerate(found):
        if item == first or item in found[:i]:
            raise ConfigError(f"{where}[{i}]", f"{item!r} is already one of the engine's URLs")
    return found


def _scrape_targets(
    value: Any, where: str, flag: str, keys: Sequence[str], types: Sequence[str], defaults: ScrapeLimits
) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Each entry of an engines- or gateways-like list: (where it is, the raw item, its url, type,
    name, limits and auth checked)."""
    for index, item in enumerate(v.sequence(value, where)):
        at = where if where == flag else f"{where}[{index}]"
        if isinstance(item, str):
            item = {"url": item}
        if not isinstance(item, dict):
            raise ConfigError(at, f"must be a mapping or a URL, not {v.type_name(item)}")
        v.known_keys(item, at, keys)
        if "url" not in item:
            raise ConfigError(f"{at}.url", "missing")
        kind = item.get("type")
        limits = {name: item.get(name, getattr(defaults, name)) for name in field_names(ScrapeLimits)}
        yield (
            at,
            item,
            {
                "url": url(item["url"], f"{at}.url" if at != flag else at),
                "type": None if kind is None else v.choice(kind, f"{at}.type", types),
                "name": v.optional_string(item.get("name"), f"{at}.name"),
                "limits": _checked_limits(limits, at, defaults),
                "auth": _auth(item, at),
            },
        )


def _unique_names(entries: Sequence[Mapping[str, Any]], where: str, what: str) -> list[str]:
    names = engine_names([e["url"] for e in entries], [e["name"] for e in entries])
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            raise ConfigError(f"{where}[{index}]", f"duplicate {what} {name!r} (same as entry {seen[name]})")
        seen[name] = index
    return names


def engine_names(urls: Sequence[str], names: Sequence[str | None]) -> list[str]:
    """The `engine` label: the configured name, else host:port, plus the path when several
    unnamed targets share one host:port."""
    netlocs = [urlsplit(url).netloc.rpartition("@")[2] for url in urls]  # never user:password@
    result = []
    for url, name, netloc in zip(urls, names, netlocs):
        if name:
            result.append(name)
        elif sum(1 for other, n in zip(netlocs, names) if other == netloc and not n) > 1:
            result.append(netloc + urlsplit(url).path)
        else:
            result.append(netloc)
    return result


def url(value: Any, where: str) -> str:
    """An http(s) URL without credentials: userinfo would reach the `engine` label, logs and error
    messages (this one does not echo the URL, for that reason)."""
    try:
        netloc = urlsplit(value).netloc if isinstance(value, str) else ""
    except ValueError:
        netloc = ""  # v.url says what is wrong with it
    if "@" in netloc:
        raise ConfigError(
            where,
            "credentials in the URL would show in labels and logs; "
            "give them as basic_auth: {username, password_file} (docs/configuration.md)",
        )
    return v.url(value, where)


def _auth(item: Mapping[str, Any], at: str) -> ScrapeAuth:
    """`basic_auth: {username, password | password_file}` and `bearer_token_file`, one of the two."""
    token_file = v.optional_string(item.get("bearer_token_file"), f"{at}.bearer_token_file")
    if "basic_auth" not in item:
        return ScrapeAuth(bearer_token_file=token_file)
    where = f"{at}.basic_auth"
    basic = v.section(item["basic_auth"], where, BASIC_AUTH_KEYS)
    if token_file is not None:
        raise ConfigError(where, "give basic_auth or bearer_token_file, not both")
    if "username" not in basic:
        raise ConfigError(f"{where}.username", "missing")
    password = v.optional_string(basic.get("password"), f"{where}.password")
    password_file = v.optional_string(basic.get("password_file"), f"{where}.password_file")
    if password is not None and password_file is not None:
        raise ConfigError(where, "give password or password_file, not both")
    return ScrapeAuth(
        username=v.string(basic["username"], f"{where}.username"), password=password, password_file=password_file
    )


def gateways(
    value: Any, where: str, defaults: ScrapeLimits, behind_of: Sequence[EngineTarget]
) -> tuple[GatewayTarget, ...]:
    known = {e.name for e in behind_of}
    entries = []
    for at, item, entry in _scrape_targets(value, where, "--gateway", GATEWAY_KEYS, GATEWAYS.names(), defaults):
        behind = tuple(v.string(name, f"{at}.engines") for name in v.sequence(item.get("engines", []), f"{at}.engines"))
        for name in behind:
            if name not in known:
                raise ConfigError(
                    f"{at}.engines",
                    f"no engine named {name!r} (engines: {', '.join(sorted(known)) or 'none configured'})",
                )
        entries.append({**entry, "engines": behind, "access_log": _access_log(item, at, entry["type"])})
    names = _unique_names(entries, where, "gateway")
    return tuple(
        GatewayTarget(
            url=e["url"],
            name=name,
            type=e["type"],
            limits=e["limits"],
            auth=e["auth"],
            engines=e["engines"],
            access_log=e["access_log"],
        )
        for e, name in zip(entries, names)
    )


def _access_log(item: Mapping[str, Any], at: str, kind: str | None) -> str | None:
    """`access_log: HOST:PORT`, for a gateway whose log format the exporter reads (its type stated)."""
    value = item.get("access_log")
    if value is None:
        return None
    if kind not in ACCESS_LOG_TYPES:
        raise ConfigError(f"{at}.access_log", f"needs type: {' or '.join(ACCESS_LOG_TYPES)} (the log format it reads)")
    host, port = v.parse_listen(value, f"{at}.access_log")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def planners(value: Any, where: str, defaults: ScrapeLimits) -> tuple[PlannerTarget, ...]:
    """`planners:`: Dynamo planners' metrics endpoints, each with the model it plans for."""
    entries = []
    for at, item, entry in _scrape_targets(value, where, "", PLANNER_KEYS, (), defaults):
        entries.append({**entry, "model": v.optional_string(item.get("model"), f"{at}.model")})
    names = _unique_names(entries, where, "planner")
    return tuple(
        PlannerTarget(url=e["url"], name=name, model=e["model"], limits=e["limits"], auth=e["auth"])
        for e, name in zip(entries, names)
    )


def probes(value: Any, where: str, through: Sequence[GatewayTarget]) -> tuple[ProbeTarget, ...]:
    defaults = ProbeTarget(name="", url="", model="")
    gateway_names = [g.name for g in through]
    result: list[ProbeTarget] = []
    for index, item in enumerate(v.sequence(value, where)):
        at = f"{where}[{index}]"
        v.section(item, at, PROBE_KEYS)
        for key in ("name", "url", "model"):
            if key not in item:
                raise ConfigError(f"{at}.{key}", "missing")
        gateway = v.optional_string(item.get("gateway"), f"{at}.gateway")
        if gateway is not None and gateway not in gateway_names:
            raise ConfigError(
                f"{at}.gateway",
                f"no gateway named {gateway!r} (gateways: {', '.join(gateway_names) or 'none configured'})",
            )
        if gateway is None and len(gateway_names) == 1:
            gateway = gateway_names[0]
        interval = v.number(
            item.get("interval_seconds", defaults.interval_seconds),
            f"{at}.interval_seconds",
            MIN_PROBE_INTERVAL_SECONDS,
            MAX_PROBE_INTERVAL_SECONDS,
        )
        timeout = v.number(
            item.get("timeout_seconds", defaults.timeout_seconds),
            f"{at}.timeout_seconds",
            MIN_TIMEOUT_SECONDS,
            MAX_TIMEOUT_SECONDS,
        )
        if timeout > interval:
            raise ConfigError(f"{at}.timeout_seconds", f"must not exceed interval_seconds ({interval:g}s)")
        direct = item.get("direct_url")
        probe = ProbeTarget(
            name=v.string(item["name"], f"{at}.name"),
            url=url(item["url"], f"{at}.url"),
            model=v.string(item["model"], f"{at}.model"),
            direct_url=None if direct is None else url(direct, f"{at}.direct_url"),
            gateway=gateway,
            max_tokens=v.integer(item.get("max_tokens", defaults.max_tokens), f"{at}.max_tokens", 1, MAX_PROBE_TOKENS),
            interval_seconds=interval,
            timeout_seconds=timeout,
            bearer_token_file=v.optional_string(item.get("bearer_token_file"), f"{at}.bearer_token_file"),
        )
        if probe.name in {p.name for p in result}:
            raise ConfigError(f"{at}.name", f"duplicate probe {probe.name!r}")
        result.append(probe)
    return tuple(result)
