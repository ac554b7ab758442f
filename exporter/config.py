"""Configuration: a YAML file and command-line flags (flags win), turned into the settings records.

Defaults are the dataclass fields of `exporter.settings`; this module only validates (through
`exporter.validation`) and builds. Every user error is a ConfigError naming the key
(`engines[1].url`) or the flag (`--interval`); the CLI prints that one line and exits 2.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from exporter import validation as v
from exporter.settings import (
    ENGINE_TYPES,
    GATEWAY_TYPES,
    GPU_MODES,
    GPU_URL_MODES,
    LOG_LEVELS,
    Config,
    EngineTarget,
    GatewayTarget,
    GpuAttribution,
    GpuSettings,
    KubernetesSettings,
    OtlpSettings,
    ProbeTarget,
    ScrapeAuth,
    ScrapeLimits,
    SloTarget,
    Thresholds,
    field_names,
)
from exporter.validation import ConfigError, load_file

__all__ = [
    "ConfigError",
    "build",
    "engine_names",
    "load_file",
    "parse_engine_flag",
    "parse_gateway_flag",
    "parse_listen",
]

_CONFIG = Config()
TOP_LEVEL_KEYS = (
    "listen",
    "interval_seconds",
    "window_seconds",
    "gpu",
    "sysfs",
    "log_level",
    "engine_defaults",
    "engines",
    "diagnosis",
    "dcgm_address",
    "gpu_attribution",
    "kubernetes",
    "web_config_file",
    "max_exported_series",
    "gateways",
    "probes",
    "slos",
    "otlp",
)
KUBERNETES_KEYS = ("enabled", "node_name", "api_url", "token_file", "ca_file", "resync_seconds", "max_engines")
ENGINE_KEYS = ("url", "type", "name", "model", "basic_auth", "bearer_token_file", *field_names(ScrapeLimits))
BASIC_AUTH_KEYS = ("username", "password", "password_file")
GPU_ATTRIBUTION_KEYS = field_names(GpuAttribution)
GATEWAY_KEYS = ("url", "type", "name", "engines", "basic_auth", "bearer_token_file", *field_names(ScrapeLimits))
PROBE_KEYS = field_names(ProbeTarget)
#: a probe more often than every 5 s is load, not a measurement; one longer than 10 min is a typo
MIN_PROBE_INTERVAL_SECONDS = 5.0
MAX_PROBE_TOKENS = 256

# Range checks beyond "positive": an interval of 1e-9 s is a busy loop, 1e300 s overflows the
# loop's timer; a timeout past an hour can only be a typo (the scrape is bounded by the interval).
MIN_INTERVAL_SECONDS = 0.1
MAX_INTERVAL_SECONDS = 3600.0
MAX_WINDOW_SECONDS = 86400.0
MAX_TIMEOUT_SECONDS = 600.0
MAX_RESPONSE_BYTES = 1024 * 1024 * 1024
MAX_SERIES = 10_000_000
MAX_LABEL_VALUE_LENGTH = 1024 * 1024
MAX_REFRESH_SECONDS = 86400.0


def build(file_data: Mapping[str, Any], flags: Mapping[str, tuple[Any, str]] | None = None) -> Config:
    """Validate file data with flag overrides; `flags` maps a key to (value, flag name)."""
    v.known_keys(file_data, "", TOP_LEVEL_KEYS)
    values: dict[str, Any] = {**file_data}
    where = {key: key for key in TOP_LEVEL_KEYS}
    for key, (value, flag) in (flags or {}).items():
        values[key], where[key] = value, flag

    def get(key: str, default: Any) -> Any:
        return values.get(key, default)

    host, port = parse_listen(get("listen", _CONFIG.listen), where["listen"])
    interval = v.number(
        get("interval_seconds", _CONFIG.interval_seconds),
        where["interval_seconds"],
        MIN_INTERVAL_SECONDS,
        MAX_INTERVAL_SECONDS,
    )
    window = v.positive_number(
        get("window_seconds", _CONFIG.window_seconds), where["window_seconds"], MAX_WINDOW_SECONDS
    )
    if window < interval:
        raise ConfigError(where["window_seconds"], f"must be at least the interval ({interval:g}s)")
    gpu = _gpu(get("gpu", _CONFIG.gpu.mode), where["gpu"], get("dcgm_address", _CONFIG.gpu.dcgm_address))
    defaults = _limits(get("engine_defaults", {}), where["engine_defaults"], ScrapeLimits())
    engines = _engines(get("engines", []), where["engines"], defaults)
    return Config(
        listen_host=host,
        listen_port=port,
        interval_seconds=interval,
        window_seconds=window,
        gpu=gpu,
        sysfs=v.string(get("sysfs", _CONFIG.sysfs), where["sysfs"]),
        log_level=v.choice(get("log_level", _CONFIG.log_level), where["log_level"], LOG_LEVELS),
        engine_defaults=defaults,
        engines=engines,
        thresholds=thresholds(get("diagnosis", {}), where["diagnosis"]),
        gpu_attribution=_gpu_attribution(
            get("gpu_attribution", {}), where["gpu_attribution"], [e.name for e in engines]
        ),
        kubernetes=_kubernetes(get("kubernetes", {}), where["kubernetes"], defaults),
        web_config_file=v.optional_string(get("web_config_file", None), where["web_config_file"]),
        max_exported_series=v.positive_int(
            get("max_exported_series", _CONFIG.max_exported_series), where["max_exported_series"], MAX_SERIES
        ),
        gateways=(gateways := _gateways(get("gateways", []), where["gateways"], defaults, engines)),
        probes=_probes(get("probes", []), where["probes"], gateways),
        slos=slos(get("slos", []), where["slos"]),
        otlp=_otlp(get("otlp", {}), where["otlp"]),
    )


def thresholds(value: Any, where: str) -> Thresholds:
    """The `diagnosis:` section: read by the exporter and, from the deployed file, by `generate`."""
    v.section(value, where, field_names(Thresholds))
    numbers = {key: v.non_negative(item, f"{where}.{key}") for key, item in value.items()}
    result = Thresholds(**numbers)
    if result.exit_score > result.enter_score:
        raise ConfigError(f"{where}.exit_score", "must not exceed enter_score (hysteresis)")
    return result


def _limits(value: Any, where: str, base: ScrapeLimits) -> ScrapeLimits:
    v.section(value, where, field_names(ScrapeLimits))
    merged = {name: value.get(name, getattr(base, name)) for name in field_names(ScrapeLimits)}
    return _checked_limits(merged, where)


def _checked_limits(values: Mapping[str, Any], where: str) -> ScrapeLimits:
    return ScrapeLimits(
        timeout_seconds=v.positive_number(values["timeout_seconds"], f"{where}.timeout_seconds", MAX_TIMEOUT_SECONDS),
        max_response_bytes=v.positive_int(
            values["max_response_bytes"], f"{where}.max_response_bytes", MAX_RESPONSE_BYTES
        ),
        max_series=v.positive_int(values["max_series"], f"{where}.max_series", MAX_SERIES),
        max_label_value_length=v.positive_int(
            values["max_label_value_length"], f"{where}.max_label_value_length", MAX_LABEL_VALUE_LENGTH
        ),
        max_models=v.positive_int(values["max_models"], f"{where}.max_models", MAX_SERIES),
        max_exported_series=v.positive_int(values["max_exported_series"], f"{where}.max_exported_series", MAX_SERIES),
    )


def _kubernetes(value: Any, where: str, limits: ScrapeLimits) -> KubernetesSettings:
    v.section(value, where, KUBERNETES_KEYS)
    defaults = KubernetesSettings()
    api_url = value.get("api_url")
    paths = {}
    for key in ("token_file", "ca_file"):  # "" turns the token off (an API behind `kubectl proxy`)
        paths[key] = value.get(key, getattr(defaults, key))
        if not isinstance(paths[key], str):
            raise ConfigError(f"{where}.{key}", f"must be a path, not {v.type_name(paths[key])}")
    return KubernetesSettings(
        enabled=v.boolean(value.get("enabled", defaults.enabled), f"{where}.enabled"),
        node_name=v.optional_string(value.get("node_name"), f"{where}.node_name"),
        api_url=None if api_url is None else _url(api_url, f"{where}.api_url"),
        token_file=paths["token_file"],
        ca_file=paths["ca_file"],
        resync_seconds=v.positive_number(
            value.get("resync_seconds", defaults.resync_seconds), f"{where}.resync_seconds", MAX_REFRESH_SECONDS
        ),
        max_engines=v.positive_int(value.get("max_engines", defaults.max_engines), f"{where}.max_engines", 4096),
        limits=limits,
    )


def _gpu_attribution(value: Any, where: str, engine_names: Sequence[str]) -> GpuAttribution:
    v.section(value, where, GPU_ATTRIBUTION_KEYS)
    defaults = GpuAttribution()
    known = ", ".join(engine_names) or "none configured"

    def engine_key(key: Any, at: str) -> str:
        if not isinstance(key, str) or key not in engine_names:
            raise ConfigError(f"{at}.{key}", f"no engine named {key!r} (engines: {known})")
        return key

    static_value = value.get("static", {})
    if not isinstance(static_value, dict):
        raise ConfigError(
            f"{where}.static", f"must be a mapping of engine name to GPUs, not {v.type_name(static_value)}"
        )
    static: dict[str, tuple[str, ...]] = {}
    for key, gpus in static_value.items():
        at = f"{where}.static.{engine_key(key, f'{where}.static')}"
        items = gpus if isinstance(gpus, list) else [gpus]
        selectors = []
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
                selectors.append(str(item))
            elif isinstance(item, str) and (item.isdigit() or item.startswith(("GPU-", "MIG-"))):
                selectors.append(item)
            else:
                raise ConfigError(at, f"expected GPU indexes or UUIDs (GPU-…/MIG-…), not {item!r}")
        static[key] = tuple(selectors)
    pods_value = value.get("engine_pods", {})
    if not isinstance(pods_value, dict):
        raise ConfigError(
            f"{where}.engine_pods",
            f"must be a mapping of engine name to NAMESPACE/POD, not {v.type_name(pods_value)}",
        )
    engine_pods: dict[str, tuple[str, str]] = {}
    for key, text in pods_value.items():
        at = f"{where}.engine_pods.{engine_key(key, f'{where}.engine_pods')}"
        namespace, sep, pod = v.string(text, at).partition("/")
        if not sep or not namespace or not pod or "/" in pod:
            raise ConfigError(at, f"expected NAMESPACE/POD, not {text!r}")
        engine_pods[key] = (namespace, pod)
    return GpuAttribution(
        static=static,
        processes=v.boolean(value.get("processes", defaults.processes), f"{where}.processes"),
        pod_resources_socket=v.path_or_empty(
            value.get("pod_resources_socket", defaults.pod_resources_socket), f"{where}.pod_resources_socket"
        ),
        engine_pods=engine_pods,
        refresh_seconds=v.positive_number(
            value.get("refresh_seconds", defaults.refresh_seconds), f"{where}.refresh_seconds", MAX_REFRESH_SECONDS
        ),
    )


def parse_listen(value: Any, where: str) -> tuple[str, int]:
    text = v.string(value, where)
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ConfigError(where, f"expected HOST:PORT, got {text!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ConfigError(where, f"port {port} out of range 1-65535")
    host = host.strip("[]") or "0.0.0.0"
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError as exc:
            raise ConfigError(where, f"{host!r} is not an IP address or localhost") from exc
    return host, port


def parse_engine_flag(text: str) -> dict[str, Any]:
    """`--engine [TYPE=]URL` into an engine entry."""
    prefix, sep, rest = text.partition("=")
    if sep and prefix in ENGINE_TYPES:
        return {"type": prefix, "url": rest}
    if sep and "/" not in prefix and ":" not in prefix:
        raise ConfigError("--engine", f"unknown engine type {prefix!r} (known: {', '.join(ENGINE_TYPES)})")
    return {"url": text}


def _engines(value: Any, where: str, defaults: ScrapeLimits) -> tuple[EngineTarget, ...]:
    entries = []
    for at, item, entry in _scrape_targets(value, where, "--engine", ENGINE_KEYS, ENGINE_TYPES, defaults):
        entry["model"] = v.optional_string(item.get("model"), f"{at}.model")
        entries.append(entry)
    names = _unique_names(entries, where, "engine")
    return tuple(
        EngineTarget(url=e["url"], name=name, type=e["type"], model=e["model"], limits=e["limits"], auth=e["auth"])
        for e, name in zip(entries, names)
    )


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
                "url": _url(item["url"], f"{at}.url" if at != flag else at),
                "type": None if kind is None else v.choice(kind, f"{at}.type", types),
                "name": v.optional_string(item.get("name"), f"{at}.name"),
                "limits": _checked_limits(limits, at),
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


def _url(value: Any, where: str) -> str:
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


KNOWN_GPU_MODES = ", ".join(f"{m}=URL" if m in GPU_URL_MODES else m for m in GPU_MODES)


def _gpu(value: Any, where: str, dcgm_address: Any) -> GpuSettings:
    text = v.string(value, where)
    address = v.string(dcgm_address, "dcgm_address")
    mode, sep, url = text.partition("=")
    if mode in GPU_URL_MODES:
        if not sep:
            port = {"dcgm-exporter": 9400, "amd-exporter": 5000, "ascend-exporter": 8082, "gaudi-exporter": 41611}
            raise ConfigError(where, f"{mode} needs a URL: {mode}=http://HOST:{port[mode]}/metrics")
        return GpuSettings(mode, _url(url, where), address)
    if sep or mode not in GPU_MODES:
        raise ConfigError(where, f"unknown GPU mode {text!r} (known: {KNOWN_GPU_MODES})")
    return GpuSettings(mode, None, address)


# -- gateways and probes (docs/configuration.md, "Gateways and probes") ---------------------------


def parse_gateway_flag(text: str) -> dict[str, Any]:
    """`--gateway [TYPE=]URL` into a gateway entry."""
    prefix, sep, rest = text.partition("=")
    if sep and prefix in GATEWAY_TYPES:
        return {"type": prefix, "url": rest}
    if sep and "/" not in prefix and ":" not in prefix:
        raise ConfigError("--gateway", f"unknown gateway type {prefix!r} (known: {', '.join(GATEWAY_TYPES)})")
    return {"url": text}


def _gateways(
    value: Any, where: str, defaults: ScrapeLimits, engines: Sequence[EngineTarget]
) -> tuple[GatewayTarget, ...]:
    known = {e.name for e in engines}
    entries = []
    for at, item, entry in _scrape_targets(value, where, "--gateway", GATEWAY_KEYS, GATEWAY_TYPES, defaults):
        behind = tuple(v.string(name, f"{at}.engines") for name in v.sequence(item.get("engines", []), f"{at}.engines"))
        for name in behind:
            if name not in known:
                raise ConfigError(
                    f"{at}.engines",
                    f"no engine named {name!r} (engines: {', '.join(sorted(known)) or 'none configured'})",
                )
        entries.append({**entry, "engines": behind})
    names = _unique_names(entries, where, "gateway")
    return tuple(
        GatewayTarget(url=e["url"], name=name, type=e["type"], limits=e["limits"], auth=e["auth"], engines=e["engines"])
        for e, name in zip(entries, names)
    )


def _probes(value: Any, where: str, gateways: Sequence[GatewayTarget]) -> tuple[ProbeTarget, ...]:
    defaults = ProbeTarget(name="", url="", model="")
    gateway_names = [g.name for g in gateways]
    probes: list[ProbeTarget] = []
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
            MAX_INTERVAL_SECONDS,
        )
        timeout = v.positive_number(
            item.get("timeout_seconds", defaults.timeout_seconds), f"{at}.timeout_seconds", MAX_TIMEOUT_SECONDS
        )
        if timeout > interval:
            raise ConfigError(f"{at}.timeout_seconds", f"must not exceed interval_seconds ({interval:g}s)")
        direct = item.get("direct_url")
        probe = ProbeTarget(
            name=v.string(item["name"], f"{at}.name"),
            url=_url(item["url"], f"{at}.url"),
            model=v.string(item["model"], f"{at}.model"),
            direct_url=None if direct is None else _url(direct, f"{at}.direct_url"),
            gateway=gateway,
            max_tokens=v.integer(item.get("max_tokens", defaults.max_tokens), f"{at}.max_tokens", 1, MAX_PROBE_TOKENS),
            interval_seconds=interval,
            timeout_seconds=timeout,
            bearer_token_file=v.optional_string(item.get("bearer_token_file"), f"{at}.bearer_token_file"),
        )
        if probe.name in {p.name for p in probes}:
            raise ConfigError(f"{at}.name", f"duplicate probe {probe.name!r}")
        probes.append(probe)
    return tuple(probes)


SLO_KEYS = ("name", "model", "engine", "ttft_seconds", "itl_seconds", "e2e_seconds", "objective")
#: SLO names become a label value and a rule-group name: keep them plain
_SLO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
#: a threshold past a day is a typo (engine histograms end near 2,560 s anyway)
MAX_SLO_SECONDS = 86400.0
#: more SLOs than this multiply series and rules past any dashboard
MAX_SLOS = 64


def slos(value: Any, where: str) -> tuple[SloTarget, ...]:
    """The `slos:` section: read by the exporter and, from the deployed file, by `generate`."""
    items = v.sequence(value, where)
    if len(items) > MAX_SLOS:
        raise ConfigError(where, f"at most {MAX_SLOS} SLOs, not {len(items)}")
    result: list[SloTarget] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        item = v.section(item, at, SLO_KEYS)
        name = v.string(v.required(item.get("name"), f"{at}.name"), f"{at}.name")
        if not _SLO_NAME.match(name):
            raise ConfigError(f"{at}.name", f"letters, digits, '_', '.', '-' (at most 63), not {name!r}")
        if any(s.name == name for s in result):
            raise ConfigError(f"{at}.name", f"duplicate SLO {name!r}")
        seconds = {
            key: v.positive_number(item[key], f"{at}.{key}", MAX_SLO_SECONDS)
            for key in ("ttft_seconds", "itl_seconds", "e2e_seconds")
            if item.get(key) is not None
        }
        if not seconds:
            raise ConfigError(at, "needs at least one of ttft_seconds, itl_seconds, e2e_seconds")
        objective = v.number(v.required(item.get("objective"), f"{at}.objective"), f"{at}.objective", 0.0, 1.0)
        if not 0.0 < objective < 1.0:
            raise ConfigError(f"{at}.objective", f"must be between 0 and 1 exclusive (e.g. 0.95), not {objective:g}")
        result.append(
            SloTarget(
                name=name,
                objective=objective,
                model=_selector_pattern(item.get("model"), f"{at}.model"),
                engine=_selector_pattern(item.get("engine"), f"{at}.engine"),
                ttft_seconds=seconds.get("ttft_seconds"),
                itl_seconds=seconds.get("itl_seconds"),
                e2e_seconds=seconds.get("e2e_seconds"),
            )
        )
    return tuple(result)


def _selector_pattern(value: Any, where: str) -> str | None:
    """An exact name or a regular expression (matched whole, as PromQL's =~ does)."""
    text = v.optional_string(value, where)
    if text is not None:
        try:
            re.compile(text)
        except re.error as exc:
            raise ConfigError(where, f"not a valid regular expression ({exc})") from exc
    return text


MAX_OTLP_REQUESTS = 10_000_000


def _otlp(value: Any, where: str) -> OtlpSettings:
    v.section(value, where, field_names(OtlpSettings))
    defaults = OtlpSettings()
    listen = value.get("listen")
    if listen is not None:
        host, port = parse_listen(listen, f"{where}.listen")
        listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return OtlpSettings(
        listen=listen,
        max_body_bytes=v.positive_int(
            value.get("max_body_bytes", defaults.max_body_bytes), f"{where}.max_body_bytes", MAX_RESPONSE_BYTES
        ),
        max_spans_per_second=v.positive_number(
            value.get("max_spans_per_second", defaults.max_spans_per_second), f"{where}.max_spans_per_second", 1e6
        ),
        max_requests=v.positive_int(
            value.get("max_requests", defaults.max_requests), f"{where}.max_requests", MAX_OTLP_REQUESTS
        ),
    )
