"""Scenario files: a node, its engine replicas, the offered load, and phases with their expected stage.

The format is documented in docs/simulator.md. Phases apply at their `start_seconds` and are
cumulative: a phase states only what changes (a longer prompt, a new engine flag, congestion) and
keeps everything earlier phases set. Every user error names its key (`phases[1].workload.rate`) and
becomes a ConfigError, which the CLI prints in one line with exit code 2.
"""

from __future__ import annotations

import copy
from bisect import bisect_right
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from exporter.catalogue import STAGES
from exporter.config import ConfigError
from exporter.simulate.engine_config import RUNTIME_KEYS, EngineConfig
from exporter.simulate.hardware import GPUS, MODELS, GpuSpec, ModelSpec
from exporter.simulate.network import NetworkCondition, NicSpec
from exporter.simulate.waitqueue import POLICIES
from exporter.simulate.workload import LengthSpec, WorkloadSpec

EXPECTED_STAGES = ("none", *STAGES)
ROUTING_POLICIES = ("round_robin", "least_loaded", "weighted")


@dataclass(frozen=True)
class NodeSpec:
    gpu: GpuSpec
    gpus: int = 8
    hostname: str = "sim-node-0"
    driver_version: str = "550.90.07"
    nic: NicSpec = NicSpec()
    nics: int = 8  # one NIC per GPU (rail-optimized)
    nic_device_prefix: str = "mlx5_"


@dataclass(frozen=True)
class ReplicaGroup:
    model: ModelSpec
    engine: EngineConfig
    count: int = 1
    tensor_parallel: int = 1
    nodes: int = 1


@dataclass(frozen=True)
class Routing:
    policy: str = "round_robin"
    weights: tuple[float, ...] = ()


@dataclass(frozen=True)
class Phase:
    name: str
    start_seconds: float
    expected_stage: str
    workload: WorkloadSpec
    network: NetworkCondition = NetworkCondition()
    engine_changes: dict[int, dict[str, Any]] = field(default_factory=dict)  # -1: every replica group
    secondary_stages: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    node: NodeSpec
    replicas: tuple[ReplicaGroup, ...]
    phases: tuple[Phase, ...]
    routing: Routing = Routing()
    seed: int = 1
    duration_seconds: float = 600.0
    warmup_seconds: float = 60.0
    source: str = ""

    def phase_at(self, t: float) -> Phase:
        starts = [p.start_seconds for p in self.phases]
        return self.phases[max(0, bisect_right(starts, t) - 1)]

    @property
    def stages_text(self) -> str:
        return " -> ".join(p.expected_stage for p in self.phases)


# --------------------------------------------------------------------------------------- loading
def builtin_names() -> list[str]:
    folder = resources.files("exporter.simulate") / "scenarios"
    return sorted(entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, else a YAML file by path."""
    if name_or_path in builtin_names():
        text = (resources.files("exporter.simulate") / "scenarios" / f"{name_or_path}.yaml").read_text("utf-8")
        return parse_scenario(text, f"built-in {name_or_path}")
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(
            "--scenario", f"{name_or_path!r} is neither a built-in scenario ({', '.join(builtin_names())}) nor a file"
        )
    return parse_scenario(path.read_text("utf-8"), str(path))


def parse_scenario(text: str, source: str) -> Scenario:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        raise ConfigError(where, f"not valid YAML ({getattr(exc, 'problem', None) or exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(source, "the top level must be a mapping")
    _keys(
        data,
        "",
        (
            "name",
            "description",
            "seed",
            "duration_seconds",
            "warmup_seconds",
            "node",
            "replicas",
            "routing",
            "workload",
            "phases",
        ),
    )
    node = _node(_mapping(data.get("node", {}), "node"))
    groups = tuple(
        _replica_group(item, f"replicas[{i}]") for i, item in enumerate(_list(data.get("replicas"), "replicas"))
    )
    used = sum(g.count * max(1, g.tensor_parallel // g.nodes) for g in groups)
    if used > node.gpus:
        raise ConfigError("replicas", f"need {used} GPUs on this node, the node has {node.gpus}")
    routing = _routing(_mapping(data.get("routing", {}), "routing"), sum(g.count for g in groups))
    phases = _phases(_mapping(data.get("workload"), "workload"), _list(data.get("phases", [{}]), "phases"), len(groups))
    return Scenario(
        name=_str(data.get("name", Path(source).stem), "name"),
        description=_str(data.get("description", ""), "description", allow_empty=True),
        node=node,
        replicas=groups,
        phases=phases,
        routing=routing,
        seed=int(_number(data.get("seed", 1), "seed")),
        duration_seconds=_number(data.get("duration_seconds", 600.0), "duration_seconds", positive=True),
        warmup_seconds=_number(data.get("warmup_seconds", 60.0), "warmup_seconds", minimum=0.0),
        source=source,
    )


def _node(data: dict[str, Any]) -> NodeSpec:
    _keys(data, "node", ("gpu", "gpus", "hostname", "driver_version", "nic", "nics"))
    gpu = _choice(data.get("gpu", "h100-sxm"), "node.gpu", GPUS)
    nic_data = _mapping(data.get("nic", {}), "node.nic")
    _keys(nic_data, "node.nic", ("rate_gbps", "link_layer", "latency_us"))
    nic = NicSpec(
        rate_gbps=int(_number(nic_data.get("rate_gbps", 400), "node.nic.rate_gbps", positive=True)),
        link_layer=_choice(nic_data.get("link_layer", "Ethernet"), "node.nic.link_layer", ("Ethernet", "InfiniBand")),
        latency_seconds=_number(nic_data.get("latency_us", 8.0), "node.nic.latency_us", positive=True) / 1e6,
    )
    gpus = int(_number(data.get("gpus", 8), "node.gpus", positive=True))
    return NodeSpec(
        gpu=GPUS[gpu],
        gpus=gpus,
        hostname=_str(data.get("hostname", "sim-node-0"), "node.hostname"),
        driver_version=_str(data.get("driver_version", "550.90.07"), "node.driver_version"),
        nic=nic,
        nics=int(_number(data.get("nics", gpus), "node.nics", minimum=0)),
    )


def _replica_group(data: Any, where: str) -> ReplicaGroup:
    data = _mapping(data, where)
    _keys(data, where, ("model", "count", "tensor_parallel", "nodes", "engine"))
    model = MODELS[_choice(data.get("model"), f"{where}.model", MODELS)]
    tp = int(_number(data.get("tensor_parallel", 1), f"{where}.tensor_parallel", positive=True))
    nodes = int(_number(data.get("nodes", 1), f"{where}.nodes", positive=True))
    if tp % nodes:
        raise ConfigError(f"{where}.nodes", f"tensor_parallel {tp} does not split evenly over {nodes} nodes")
    engine = _engine(
        _mapping(data.get("engine", {}), f"{where}.engine"), f"{where}.engine", EngineConfig(), all_keys=True
    )
    if not engine.chunked_prefill and engine.max_num_batched_tokens < (
        engine.max_model_len or model.max_position_embeddings
    ):
        raise ConfigError(
            f"{where}.engine.max_num_batched_tokens",
            "must be at least max_model_len when chunked_prefill is off (as vLLM requires)",
        )
    return ReplicaGroup(model, engine, int(_number(data.get("count", 1), f"{where}.count", positive=True)), tp, nodes)


def _engine(data: dict[str, Any], where: str, base: EngineConfig, all_keys: bool) -> EngineConfig:
    allowed = tuple(f.name for f in fields(EngineConfig)) if all_keys else RUNTIME_KEYS
    _keys(data, where, allowed)
    values: dict[str, Any] = {}
    for key, value in data.items():
        default = getattr(base, key)
        at = f"{where}.{key}"
        if key == "scheduling":
            values[key] = _choice(value, at, POLICIES)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(at, f"must be true or false, not {value!r}")
            values[key] = value
        elif isinstance(default, int):
            values[key] = int(_number(value, at, minimum=0 if key == "max_model_len" else 1))
        else:
            values[key] = (
                _number(value, at, minimum=0.0) if key == "kv_watermark" else _number(value, at, positive=True)
            )
    for key in ("gpu_memory_utilization", "mfu", "mbu", "kv_watermark"):
        if key in values and values[key] > 1:
            raise ConfigError(f"{where}.{key}", f"must be at most 1, not {values[key]!r}")
    return EngineConfig(**{**base.__dict__, **values})


def _routing(data: dict[str, Any], replicas: int) -> Routing:
    _keys(data, "routing", ("policy", "weights"))
    policy = _choice(data.get("policy", "round_robin"), "routing.policy", ROUTING_POLICIES)
    weights = tuple(
        _number(w, f"routing.weights[{i}]", minimum=0.0)
        for i, w in enumerate(_list(data.get("weights", []), "routing.weights"))
    )
    if policy == "weighted" and len(weights) != replicas:
        raise ConfigError("routing.weights", f"needs one weight per replica ({replicas}), got {len(weights)}")
    return Routing(policy, weights)


def _phases(base_workload: dict[str, Any], items: list[Any], groups: int) -> tuple[Phase, ...]:
    phases: list[Phase] = []
    workload = copy.deepcopy(base_workload)
    engine: dict[str, Any] = {}
    network: dict[str, Any] = {}
    for index, item in enumerate(items):
        where = f"phases[{index}]"
        data = _mapping(item, where)
        _keys(
            data,
            where,
            ("name", "start_seconds", "expected_stage", "secondary_stages", "note", "workload", "engine", "network"),
        )
        start = _number(data.get("start_seconds", 0.0), f"{where}.start_seconds", minimum=0.0)
        if index == 0 and start != 0:
            raise ConfigError(f"{where}.start_seconds", "the first phase starts at 0")
        if phases and start <= phases[-1].start_seconds:
            raise ConfigError(f"{where}.start_seconds", "phases must start in increasing order")
        workload = _merge(workload, _mapping(data.get("workload", {}), f"{where}.workload"))
        engine_data = _mapping(data.get("engine", {}), f"{where}.engine")
        _engine(engine_data, f"{where}.engine", EngineConfig(), all_keys=False)  # validates runtime keys
        engine = {**engine, **engine_data}
        network_data = _mapping(data.get("network", {}), f"{where}.network")
        _keys(network_data, f"{where}.network", ("background_utilization", "ecn_mark_fraction"))
        network = {**network, **network_data}
        phases.append(
            Phase(
                name=_str(data.get("name", f"phase-{index}"), f"{where}.name"),
                start_seconds=start,
                expected_stage=_choice(data.get("expected_stage", "none"), f"{where}.expected_stage", EXPECTED_STAGES),
                secondary_stages=tuple(
                    _choice(s, f"{where}.secondary_stages[{i}]", EXPECTED_STAGES)
                    for i, s in enumerate(_list(data.get("secondary_stages", []), f"{where}.secondary_stages"))
                ),
                note=_str(data.get("note", ""), f"{where}.note", allow_empty=True),
                workload=_workload(workload, f"{where}.workload" if data.get("workload") else "workload"),
                network=NetworkCondition(
                    _number(
                        network.get("background_utilization", 0.0),
                        f"{where}.network.background_utilization",
                        minimum=0.0,
                        maximum=0.95,
                    ),
                    _number(
                        network.get("ecn_mark_fraction", 0.0),
                        f"{where}.network.ecn_mark_fraction",
                        minimum=0.0,
                        maximum=1.0,
                    ),
                ),
                engine_changes={-1: dict(engine)} if engine else {},
            )
        )
    return tuple(phases)


def _workload(data: dict[str, Any], where: str) -> WorkloadSpec:
    _keys(
        data,
        where,
        (
            "rate_per_second",
            "arrival",
            "burstiness_cv",
            "prompt_tokens",
            "output_tokens",
            "shared_prefix_ratio",
            "prefix_groups",
            "max_tokens",
            "client_timeout_seconds",
        ),
    )
    max_tokens = data.get("max_tokens")
    timeout = data.get("client_timeout_seconds")
    return WorkloadSpec(
        rate_per_second=_number(data.get("rate_per_second"), f"{where}.rate_per_second", minimum=0.0),
        prompt_tokens=_length(data.get("prompt_tokens"), f"{where}.prompt_tokens"),
        output_tokens=_length(data.get("output_tokens"), f"{where}.output_tokens"),
        arrival=_choice(data.get("arrival", "poisson"), f"{where}.arrival", ("poisson", "gamma")),
        burstiness_cv=_number(data.get("burstiness_cv", 1.0), f"{where}.burstiness_cv", positive=True),
        shared_prefix_ratio=_number(
            data.get("shared_prefix_ratio", 0.0), f"{where}.shared_prefix_ratio", minimum=0.0, maximum=0.99
        ),
        prefix_groups=int(_number(data.get("prefix_groups", 1), f"{where}.prefix_groups", positive=True)),
        max_tokens=None if max_tokens is None else int(_number(max_tokens, f"{where}.max_tokens", positive=True)),
        client_timeout_seconds=None
        if timeout is None
        else _number(timeout, f"{where}.client_timeout_seconds", positive=True),
    )


def _length(data: Any, where: str) -> LengthSpec:
    data = _mapping(data, where)
    _keys(data, where, ("mean", "cv", "min", "max"))
    spec = LengthSpec(
        mean=_number(data.get("mean"), f"{where}.mean", positive=True),
        cv=_number(data.get("cv", 0.5), f"{where}.cv", minimum=0.0),
        min=int(_number(data.get("min", 1), f"{where}.min", positive=True)),
        max=int(_number(data.get("max", 1_000_000), f"{where}.max", positive=True)),
    )
    if spec.min > spec.max:
        raise ConfigError(f"{where}.min", f"{spec.min} is above max {spec.max}")
    return spec


# ----------------------------------------------------------------------------- small validators
def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _keys(data: dict[str, Any], where: str, allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            at = f"{where}.{key}" if where else str(key)
            raise ConfigError(at, f"unknown key (known: {', '.join(allowed)})")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        raise ConfigError(where, "missing")
    if not isinstance(value, dict):
        raise ConfigError(where, "must be a mapping")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list) or not value and where in ("replicas", "phases"):
        raise ConfigError(where, "must be a non-empty list")
    return value


def _str(value: Any, where: str, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ConfigError(where, "must be a non-empty string")
    return value


def _choice(value: Any, where: str, choices: Any) -> str:
    if value is None:
        raise ConfigError(where, "missing")
    if value not in choices:
        raise ConfigError(where, f"{value!r} is not one of {', '.join(choices)}")
    return str(value)


def _number(
    value: Any, where: str, positive: bool = False, minimum: float | None = None, maximum: float | None = None
) -> float:
    if value is None:
        raise ConfigError(where, "missing")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(where, f"must be a number, not {value!r}")
    number = float(value)
    if positive and number <= 0:
        raise ConfigError(where, f"must be greater than 0, not {value!r}")
    if minimum is not None and number < minimum:
        raise ConfigError(where, f"must be at least {minimum:g}, not {value!r}")
    if maximum is not None and number > maximum:
        raise ConfigError(where, f"must be at most {maximum:g}, not {value!r}")
    return number
