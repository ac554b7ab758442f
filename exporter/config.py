"""Configuration: a YAML file and command-line flags (flags win), turned into the settings records.

Defaults are the dataclass fields of `exporter.settings`; this module only validates (through
`exporter.validation`) and builds. Every user error is a ConfigError naming the key
(`engines[1].url`) or the flag (`--interval`); the CLI prints that one line and exits 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from exporter import config_targets as targets
from exporter import validation as v
from exporter.config_health import health
from exporter.config_profile import profile
from exporter.config_targets import MAX_RESPONSE_BYTES, MAX_SERIES, engine_names, parse_engine_flag, parse_gateway_flag
from exporter.settings import (
    LOG_LEVELS,
    OTLP_MODELS,
    OTLP_SENDERS,
    CapacitySettings,
    Config,
    GpuAttribution,
    GpuSettings,
    KubernetesSettings,
    OtlpSettings,
    ScrapeLimits,
    SloTarget,
    Thresholds,
    field_names,
)
from exporter.sources.gpu import GPU_MODES
from exporter.validation import ConfigError, load_file, parse_listen

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
    "capacity",
    "planners",
    "health",
    "profile",
)
KUBERNETES_KEYS = ("enabled", "node_name", "api_url", "token_file", "ca_file", "resync_seconds", "max_engines")
GPU_ATTRIBUTION_KEYS = field_names(GpuAttribution)

# Range checks beyond "positive": an interval of 1e-9 s is a busy loop, 1e300 s overflows the
# loop's timer.
MIN_INTERVAL_SECONDS = 0.1
MAX_INTERVAL_SECONDS = 3600.0
MAX_WINDOW_SECONDS = 86400.0
#: a full Kubernetes list more often than every 10 s is load on the API server, not freshness (the
#: watch carries changes between lists); the process table and the kubelet are asked at most each second
MIN_RESYNC_SECONDS = 10.0
MIN_REFRESH_SECONDS = 1.0
MAX_REFRESH_SECONDS = 86400.0

#: Each `diagnosis:` key's range, (low, high, low excluded). Ratios of a whole (KV usage, the DCGM
#: activities, link utilization, scores) lie in [0, 1]; a slowdown is a ratio over 1 (at 1 every
#: decode step would be "slowed"); durations are positive and at most a day (the baseline a week);
#: rates and counts are non-negative and finite. docs/configuration.md, "Bounds", lists the same.
RATIO = (0.0, 1.0, False)
THRESHOLD_BOUNDS: Mapping[str, tuple[float, float, bool]] = {
    "waiting_requests": (0.0, 1e6, False),
    "kv_usage_warning": RATIO,
    "kv_usage_critical": RATIO,
    "preemptions_per_second": (0.0, 1e6, False),
    "dram_active_saturated": RATIO,
    "dram_active_busy": RATIO,
    "sm_active_ineffective": RATIO,
    "tensor_active_high": RATIO,
    "ttft_p95_seconds": (0.0, 86400.0, True),
    "itl_p95_seconds": (0.0, 86400.0, True),
    "itl_slowdown_ratio": (1.0, 1000.0, True),
    "rdma_utilization_high": RATIO,
    "cnp_per_second": (0.0, 1e9, False),
    "retransmissions_per_second": (0.0, 1e9, False),
    "engine_cpu_cores_busy": (0.0, 4096.0, True),
    "enter_score": RATIO,
    "exit_score": RATIO,
    "level_seconds": (0.0, 86400.0, True),
    "baseline_seconds": (0.0, 7 * 86400.0, True),
}
#: pairs (lower, upper) where the lower line must not sit above the upper one
THRESHOLD_ORDER = (
    ("kv_usage_warning", "kv_usage_critical"),
    ("dram_active_busy", "dram_active_saturated"),
    ("exit_score", "enter_score"),
    ("level_seconds", "baseline_seconds"),
)


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
    defaults = targets.limits(get("engine_defaults", {}), where["engine_defaults"], ScrapeLimits())
    engines = targets.engines(get("engines", []), where["engines"], defaults)
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
        gateways=(gateways := targets.gateways(get("gateways", []), where["gateways"], defaults, engines)),
        probes=targets.probes(get("probes", []), where["probes"], gateways),
        slos=slos(get("slos", []), where["slos"]),
        otlp=_otlp(get("otlp", {}), where["otlp"]),
        capacity=capacity(get("capacity", {}), where["capacity"]),
        planners=targets.planners(get("planners", []), where["planners"], defaults),
        health=health(get("health", {}), where["health"]),
        profile=profile(get("profile", {}), where["profile"]),
    )


def thresholds(value: Any, where: str) -> Thresholds:
    """The `diagnosis:` section: read by the exporter and, from the deployed file, by `generate`."""
    v.section(value, where, field_names(Thresholds))
    numbers = {key: _bounded(item, f"{where}.{key}", *THRESHOLD_BOUNDS[key]) for key, item in value.items()}
    result = Thresholds(**numbers)
    for lower, upper in THRESHOLD_ORDER:
        if getattr(result, lower) > getattr(result, upper):
            # exit above enter would leave a stage active forever once entered (no hysteresis)
            raise ConfigError(f"{where}.{lower}", f"must not exceed {upper} ({getattr(result, upper):g})")
    return result


def _bounded(value: Any, where: str, low: float, high: float, low_excluded: bool) -> float:
    result = v.number(value, where, None if low_excluded else low, high)
    if low_excluded and result <= low:
        raise ConfigError(where, f"must be greater than {low:g}, not {value!r}")
    return result


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
        api_url=None if api_url is None else targets.url(api_url, f"{where}.api_url"),
        token_file=paths["token_file"],
        ca_file=paths["ca_file"],
        resync_seconds=v.number(
            value.get("resync_seconds", defaults.resync_seconds),
            f"{where}.resync_seconds",
            MIN_RESYNC_SECONDS,
            MAX_REFRESH_SECONDS,
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
        refresh_seconds=v.number(
            value.get("refresh_seconds", defaults.refresh_seconds),
            f"{where}.refresh_seconds",
            MIN_REFRESH_SECONDS,
            MAX_REFRESH_SECONDS,
        ),
    )


def known_gpu_modes() -> str:
    """The `--gpu` modes as a user writes them, for errors and help."""
    return ", ".join(mode.usage for mode in (GPU_MODES[name] for name in GPU_MODES.names()))


def _gpu(value: Any, where: str, dcgm_address: Any) -> GpuSettings:
    text = v.string(value, where)
    address = v.string(dcgm_address, "dcgm_address")
    name, sep, url = text.partition("=")
    mode = GPU_MODES.get(name)
    if mode is not None and mode.exporter_port is not None:
        if not sep:
            raise ConfigError(where, f"{name} needs a URL: {name}=http://HOST:{mode.exporter_port}/metrics")
        return GpuSettings(name, targets.url(url, where), address)
    if sep or mode is None:
        raise ConfigError(where, f"unknown GPU mode {text!r} (known: {known_gpu_modes()})")
    return GpuSettings(name, None, address)


SLO_KEYS = ("name", "model", "engine", "ttft_seconds", "itl_seconds", "e2e_seconds", "objective")
#: SLO names become a label value and a rule-group name: keep them plain
_SLO_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
#: a threshold past a day is a typo (engine histograms end near 2,560 s anyway)
MAX_SLO_SECONDS = 86400.0
#: more SLOs than this multiply series and rules past any dashboard
MAX_SLOS = 64


def _selector(value: Any, where: str) -> str | None:
    """An exact name or an RE2 regular expression matched whole, as PromQL's =~ (slo/selectors.py)."""
    return None if value is None else v.regex(value, where)


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
                model=_selector(item.get("model"), f"{at}.model"),
                engine=_selector(item.get("engine"), f"{at}.engine"),
                ttft_seconds=seconds.get("ttft_seconds"),
                itl_seconds=seconds.get("itl_seconds"),
                e2e_seconds=seconds.get("e2e_seconds"),
            )
        )
    return tuple(result)


MAX_OTLP_REQUESTS = 10_000_000


def _otlp(value: Any, where: str) -> OtlpSettings:
    v.section(value, where, field_names(OtlpSettings))
    defaults = OtlpSettings()
    listen = value.get("listen")
    if listen is not None:
        host, port = parse_listen(listen, f"{where}.listen")
        listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def bytes_key(key: str) -> int:
        return v.positive_int(value.get(key, getattr(defaults, key)), f"{where}.{key}", MAX_RESPONSE_BYTES)

    return OtlpSettings(
        listen=listen,
        web_config_file=v.optional_string(value.get("web_config_file"), f"{where}.web_config_file"),
        max_body_bytes=bytes_key("max_body_bytes"),
        max_client_bytes_per_second=bytes_key("max_client_bytes_per_second"),
        max_spans_per_second=v.positive_number(
            value.get("max_spans_per_second", defaults.max_spans_per_second), f"{where}.max_spans_per_second", 1e6
        ),
        max_requests=v.positive_int(
            value.get("max_requests", defaults.max_requests), f"{where}.max_requests", MAX_OTLP_REQUESTS
        ),
        senders=v.choice(value.get("senders", defaults.senders), f"{where}.senders", OTLP_SENDERS),
        models=v.choice(value.get("models", defaults.models), f"{where}.models", OTLP_MODELS),
    )


#: a target utilization under 0.1 provisions ten times the load; at 1 the SLO breaks as load arrives
TARGET_UTILIZATION_BOUNDS = (0.1, 1.0)
MAX_STABILIZATION_SECONDS = 3600.0
#: the most a GPU-hour is priced at: a typo's guard (list prices are a few dollars)
MAX_GPU_HOUR_PRICE = 10_000.0
MAX_NUM_SEQS = 1_000_000


def capacity(value: Any, where: str) -> CapacitySettings:
    """The `capacity:` section: read by the exporter and, from the deployed file, by `generate`."""
    v.section(value, where, field_names(CapacitySettings))
    defaults = CapacitySettings()

    def number(key: str, low: float, high: float) -> float:
        return v.number(value.get(key, getattr(defaults, key)), f"{where}.{key}", low, high)

    seqs = v.mapping(value.get("max_num_seqs", {}), f"{where}.max_num_seqs")
    prices = v.mapping(value.get("gpu_hour_price", {}), f"{where}.gpu_hour_price")
    return CapacitySettings(
        target_utilization=number("target_utilization", *TARGET_UTILIZATION_BOUNDS),
        scale_down_stabilization_seconds=number("scale_down_stabilization_seconds", 0.0, MAX_STABILIZATION_SECONDS),
        concurrency_tolerance=number("concurrency_tolerance", 0.0, 10.0),
        max_num_seqs={
            v.string(engine, f"{where}.max_num_seqs"): v.positive_int(n, f"{where}.max_num_seqs.{engine}", MAX_NUM_SEQS)
            for engine, n in seqs.items()
        },
        gpu_hour_price={
            v.string(model, f"{where}.gpu_hour_price"): v.non_negative(
                price, f"{where}.gpu_hour_price.{model}", MAX_GPU_HOUR_PRICE
            )
            for model, price in prices.items()
        },
    )
