"""Configuration: a YAML file and command-line flags (flags win), validated into one dataclass.

Every user error becomes a ConfigError that names the key (`engines[1].url`) or the flag
(`--interval`) and what is wrong with it; the CLI prints that one line and exits 2.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from exporter.diagnosis.thresholds import Thresholds
from exporter.discovery import KubernetesSettings
from exporter.sources.engine import EngineTarget
from exporter.sources.engines import ENGINE_TYPES

DEFAULT_LISTEN = "0.0.0.0:9477"
GPU_MODES = ("auto", "nvml", "dcgm", "dcgm-exporter", "none")
LOG_LEVELS = ("debug", "info", "warning", "error")

ENGINE_DEFAULTS: dict[str, Any] = {
    "timeout_seconds": 2.0,
    "max_response_bytes": 16 * 1024 * 1024,
    "max_series": 10_000,
    "max_label_value_length": 1024,
}
TOP_LEVEL_DEFAULTS: dict[str, Any] = {
    "listen": DEFAULT_LISTEN,
    "interval_seconds": 5.0,
    "window_seconds": 60.0,
    "gpu": "auto",
    "sysfs": "/sys",
    "log_level": "info",
    "engine_defaults": {},
    "engines": [],
    "diagnosis": {},
    "dcgm_address": "localhost:5555",
    "gpu_attribution": {},
    "kubernetes": {},
    "web_config_file": None,
}
KUBERNETES_KEYS = ("enabled", "node_name", "api_url", "token_file", "ca_file", "resync_seconds", "max_engines")
ENGINE_KEYS = ("url", "type", "name", "model", *ENGINE_DEFAULTS)
DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
GPU_ATTRIBUTION_KEYS = ("static", "processes", "pod_resources_socket", "engine_pods", "refresh_seconds")


class ConfigError(Exception):
    """A user error in the configuration or flags; `where` is the key path or flag name."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where


@dataclass(frozen=True)
class GpuAttribution:
    """How GPUs are tied to engines (docs/gpu.md, "Attribution")."""

    # engine name -> GPU indexes ("0") or UUIDs ("GPU-…", "MIG-…") it uses
    static: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    processes: bool = True
    pod_resources_socket: str = DEFAULT_POD_RESOURCES_SOCKET  # "" turns pod-resources off
    # engine name -> (namespace, pod), for engines whose pod cannot be found from their process
    engine_pods: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    refresh_seconds: float = 30.0


@dataclass(frozen=True)
class Config:
    listen_host: str = "0.0.0.0"
    listen_port: int = 9477
    interval_seconds: float = 5.0
    window_seconds: float = 60.0
    gpu: str = "auto"
    gpu_url: str | None = None  # for gpu: dcgm-exporter=URL
    sysfs: str = "/sys"
    log_level: str = "info"
    engines: tuple[EngineTarget, ...] = field(default_factory=tuple)
    thresholds: Thresholds = field(default_factory=Thresholds)
    dcgm_address: str = "localhost:5555"  # DCGM host engine; "embedded" starts one in-process
    gpu_attribution: GpuAttribution = field(default_factory=GpuAttribution)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)  # engine discovery
    web_config_file: str | None = None  # TLS and basic auth (exporter-toolkit format)

    @property
    def listen(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"


def load_file(path: str) -> dict[str, Any]:
    """Read a YAML file into a mapping; an empty file is an empty configuration."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise ConfigError(path, exc.strerror or str(exc)) from exc
    except UnicodeDecodeError as exc:  # found by tests/fuzz/config_fuzzer.py: was a traceback, exit 1
        raise ConfigError(
            path, f"not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})"
        ) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        raise ConfigError(where, f"not valid YAML ({getattr(exc, 'problem', None) or exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(path, f"the top level must be a mapping, not {_type_name(data)}")
    return data


def build(file_data: Mapping[str, Any], flags: Mapping[str, tuple[Any, str]] | None = None) -> Config:
    """Validate file data with flag overrides; `flags` maps a key to (value, flag name)."""
    for key in file_data:
        if key not in TOP_LEVEL_DEFAULTS:
            raise ConfigError(str(key), f"unknown key (known: {', '.join(TOP_LEVEL_DEFAULTS)})")
    values = {**TOP_LEVEL_DEFAULTS, **file_data}
    where = {key: key for key in values}
    for key, (value, flag) in (flags or {}).items():
        values[key], where[key] = value, flag

    host, port = parse_listen(values["listen"], where["listen"])
    interval = _positive_number(values["interval_seconds"], where["interval_seconds"])
    window = _positive_number(values["window_seconds"], where["window_seconds"])
    if window < interval:
        raise ConfigError(where["window_seconds"], f"must be at least the interval ({interval:g}s)")
    gpu, gpu_url = _gpu_mode(values["gpu"], where["gpu"])
    sysfs = _string(values["sysfs"], where["sysfs"])
    log_level = _choice(values["log_level"], where["log_level"], LOG_LEVELS)
    defaults = _engine_defaults(values["engine_defaults"], where["engine_defaults"])
    engines = _engines(values["engines"], where["engines"], defaults)
    thresholds = _thresholds(values["diagnosis"], where["diagnosis"])
    dcgm_address = _string(values["dcgm_address"], where["dcgm_address"])
    attribution = _gpu_attribution(values["gpu_attribution"], where["gpu_attribution"], [e.name for e in engines])
    return Config(
        host,
        port,
        interval,
        window,
        gpu,
        gpu_url,
        sysfs,
        log_level,
        engines,
        thresholds,
        dcgm_address=dcgm_address,
        gpu_attribution=attribution,
        kubernetes=_kubernetes(values["kubernetes"], where["kubernetes"], defaults),
        web_config_file=_optional_string(values["web_config_file"], where["web_config_file"]),
    )


def _kubernetes(value: Any, where: str, engine_defaults: Mapping[str, Any]) -> KubernetesSettings:
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping, not {_type_name(value)}")
    for key in value:
        if key not in KUBERNETES_KEYS:
            raise ConfigError(f"{where}.{key}", f"unknown key (known: {', '.join(KUBERNETES_KEYS)})")
    enabled = value.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{where}.enabled", f"must be true or false, not {enabled!r}")
    api_url = value.get("api_url")
    if api_url is not None:
        api_url = _url(api_url, f"{where}.api_url")
    defaults = KubernetesSettings()
    paths = {}
    for key in ("token_file", "ca_file"):  # "" turns the token off (an API behind `kubectl proxy`)
        paths[key] = value.get(key, getattr(defaults, key))
        if not isinstance(paths[key], str):
            raise ConfigError(f"{where}.{key}", f"must be a path, not {_type_name(paths[key])}")
    return KubernetesSettings(
        enabled=enabled,
        node_name=_optional_string(value.get("node_name"), f"{where}.node_name"),
        api_url=api_url,
        token_file=paths["token_file"],
        ca_file=paths["ca_file"],
        resync_seconds=_positive_number(
            value.get("resync_seconds", defaults.resync_seconds), f"{where}.resync_seconds"
        ),
        max_engines=_positive_int(value.get("max_engines", defaults.max_engines), f"{where}.max_engines"),
        timeout_seconds=_positive_number(engine_defaults["timeout_seconds"], "engine_defaults.timeout_seconds"),
        max_response_bytes=_positive_int(engine_defaults["max_response_bytes"], "engine_defaults.max_response_bytes"),
        max_series=_positive_int(engine_defaults["max_series"], "engine_defaults.max_series"),
        max_label_value_length=_positive_int(
            engine_defaults["max_label_value_length"], "engine_defaults.max_label_value_length"
        ),
    )


def _thresholds(value: Any, where: str) -> Thresholds:
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping, not {_type_name(value)}")
    known = Thresholds.keys()
    numbers = {}
    for key, item in value.items():
        if key not in known:
            raise ConfigError(f"{where}.{key}", f"unknown key (known: {', '.join(known)})")
        numbers[key] = _number(item, f"{where}.{key}")
        if numbers[key] < 0:
            raise ConfigError(f"{where}.{key}", f"must not be negative, not {item!r}")
    thresholds = Thresholds(**numbers)
    if thresholds.exit_score > thresholds.enter_score:
        raise ConfigError(f"{where}.exit_score", "must not exceed enter_score (hysteresis)")
    return thresholds


def _gpu_attribution(value: Any, where: str, engine_names: Sequence[str]) -> GpuAttribution:
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping, not {_type_name(value)}")
    for key in value:
        if key not in GPU_ATTRIBUTION_KEYS:
            raise ConfigError(f"{where}.{key}", f"unknown key (known: {', '.join(GPU_ATTRIBUTION_KEYS)})")
    known = ", ".join(engine_names) or "none configured"

    def engine_key(key: Any, at: str) -> str:
        if not isinstance(key, str) or key not in engine_names:
            raise ConfigError(f"{at}.{key}", f"no engine named {key!r} (engines: {known})")
        return key

    static_value = value.get("static", {})
    if not isinstance(static_value, dict):
        raise ConfigError(
            f"{where}.static", f"must be a mapping of engine name to GPUs, not {_type_name(static_value)}"
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
    processes = value.get("processes", True)
    if not isinstance(processes, bool):
        raise ConfigError(f"{where}.processes", f"must be true or false, not {processes!r}")
    socket_path = value.get("pod_resources_socket", DEFAULT_POD_RESOURCES_SOCKET)
    if socket_path is None:
        socket_path = ""
    if not isinstance(socket_path, str):
        raise ConfigError(f"{where}.pod_resources_socket", f"must be a path or empty, not {_type_name(socket_path)}")
    pods_value = value.get("engine_pods", {})
    if not isinstance(pods_value, dict):
        raise ConfigError(
            f"{where}.engine_pods", f"must be a mapping of engine name to NAMESPACE/POD, not {_type_name(pods_value)}"
        )
    engine_pods: dict[str, tuple[str, str]] = {}
    for key, text in pods_value.items():
        at = f"{where}.engine_pods.{engine_key(key, f'{where}.engine_pods')}"
        namespace, sep, pod = _string(text, at).partition("/")
        if not sep or not namespace or not pod or "/" in pod:
            raise ConfigError(at, f"expected NAMESPACE/POD, not {text!r}")
        engine_pods[key] = (namespace, pod)
    refresh = _positive_number(value.get("refresh_seconds", 30.0), f"{where}.refresh_seconds")
    return GpuAttribution(static, processes, socket_path, engine_pods, refresh)


def parse_listen(value: Any, where: str) -> tuple[str, int]:
    text = _string(value, where)
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


def _engine_defaults(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(where, f"must be a mapping, not {_type_name(value)}")
    merged = dict(ENGINE_DEFAULTS)
    for key, item in value.items():
        if key not in ENGINE_DEFAULTS:
            raise ConfigError(f"{where}.{key}", f"unknown key (known: {', '.join(ENGINE_DEFAULTS)})")
        merged[key] = item
    return merged


def _engines(value: Any, where: str, defaults: Mapping[str, Any]) -> tuple[EngineTarget, ...]:
    if not isinstance(value, list):
        raise ConfigError(where, f"must be a list, not {_type_name(value)}")
    entries = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]" if where == "engines" else where
        if isinstance(item, str):
            item = {"url": item}
        if not isinstance(item, dict):
            raise ConfigError(at, f"must be a mapping or a URL, not {_type_name(item)}")
        for key in item:
            if key not in ENGINE_KEYS:
                raise ConfigError(f"{at}.{key}", f"unknown key (known: {', '.join(ENGINE_KEYS)})")
        if "url" not in item:
            raise ConfigError(f"{at}.url", "missing")
        entry = {**defaults, **item}
        url = _url(entry["url"], f"{at}.url" if at != "--engine" else at)
        engine_type = entry.get("type")
        if engine_type is not None:
            engine_type = _choice(engine_type, f"{at}.type", ENGINE_TYPES)
        entries.append(
            {
                "url": url,
                "type": engine_type,
                "name": _optional_string(entry.get("name"), f"{at}.name"),
                "model": _optional_string(entry.get("model"), f"{at}.model"),
                "timeout_seconds": _positive_number(entry["timeout_seconds"], f"{at}.timeout_seconds"),
                "max_response_bytes": _positive_int(entry["max_response_bytes"], f"{at}.max_response_bytes"),
                "max_series": _positive_int(entry["max_series"], f"{at}.max_series"),
                "max_label_value_length": _positive_int(
                    entry["max_label_value_length"], f"{at}.max_label_value_length"
                ),
            }
        )
    names = engine_names([e["url"] for e in entries], [e["name"] for e in entries])
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            raise ConfigError(f"{where}[{index}]", f"duplicate engine {name!r} (same as entry {seen[name]})")
        seen[name] = index
    return tuple(
        EngineTarget(
            url=e["url"],
            name=name,
            type=e["type"],
            model=e["model"],
            timeout_seconds=e["timeout_seconds"],
            max_response_bytes=e["max_response_bytes"],
            max_series=e["max_series"],
            max_label_value_length=e["max_label_value_length"],
        )
        for e, name in zip(entries, names)
    )


def engine_names(urls: Sequence[str], names: Sequence[str | None]) -> list[str]:
    """The `engine` label: the configured name, else host:port, plus the path when several
    unnamed targets share one host:port."""
    netlocs = [urlsplit(url).netloc for url in urls]
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
    text = _string(value, where)
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise ConfigError(where, f"not a valid URL: {text!r} ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(where, f"not an http(s) URL: {text!r}")
    try:
        parts.port
    except ValueError as exc:
        raise ConfigError(where, f"bad port in {text!r}") from exc
    return text


def _gpu_mode(value: Any, where: str) -> tuple[str, str | None]:
    text = _string(value, where)
    mode, sep, url = text.partition("=")
    if mode == "dcgm-exporter":
        if not sep:
            raise ConfigError(where, "dcgm-exporter needs a URL: dcgm-exporter=http://HOST:9400/metrics")
        return mode, _url(url, where)
    if sep or mode not in GPU_MODES:
        raise ConfigError(where, f"unknown GPU mode {text!r} (known: auto, nvml, dcgm, dcgm-exporter=URL, none)")
    return mode, None


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "empty"}.get(
        type(value), type(value).__name__
    )


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(where, f"must be a non-empty string, not {_type_name(value)}")
    return value


def _optional_string(value: Any, where: str) -> str | None:
    return None if value is None else _string(value, where)


def _choice(value: Any, where: str, choices: Sequence[str]) -> str:
    text = _string(value, where)
    if text not in choices:
        raise ConfigError(where, f"{text!r} is not one of {', '.join(choices)}")
    return text


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ConfigError(where, f"must be a number, not {_type_name(value)}")
    try:
        number = float(value)
    except ValueError as exc:
        raise ConfigError(where, f"must be a number, not {value!r}") from exc
    if not math.isfinite(number):
        raise ConfigError(where, f"must be finite, not {value!r}")
    return number


def _positive_number(value: Any, where: str) -> float:
    number = _number(value, where)
    if number <= 0:
        raise ConfigError(where, f"must be greater than 0, not {value!r}")
    return number


def _positive_int(value: Any, where: str) -> int:
    number = _positive_number(value, where)
    if number != int(number):
        raise ConfigError(where, f"must be a whole number, not {value!r}")
    return int(number)
