"""Scenario files: a node, its engine replicas, the offered load, and phases with their expected stage.

The format is documented in docs/simulator.md. Phases apply at their `start_seconds` and are
cumulative: a phase states only what changes (a longer prompt, a new engine flag, congestion) and
keeps everything earlier phases set. Every user error names its key (`phases[1].workload.rate`) and
becomes a ConfigError, which the CLI prints in one line with exit code 2. The generic checks (a
number in range, a known key, a bounded YAML load) are `exporter.validation`'s, shared with the
exporter's configuration; only the rules about scenarios (GPUs per node, phase order) live here.
"""

from __future__ import annotations

import copy
from bisect import bisect_right
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from exporter import validation as v
from exporter.simulate.cluster_spec import ClusterSpec, parse_cluster
from exporter.simulate.engine_config import RUNTIME_KEYS, EngineConfig
from exporter.simulate.faults import (
    ExpectedFinding,
    GpuFault,
    NicFault,
    parse_expected_findings,
    parse_gpu_faults,
    parse_nic_faults,
)
from exporter.simulate.hardware import GPUS, MODELS, GpuSpec, ModelSpec
from exporter.simulate.network import NetworkCondition, NicSpec
from exporter.simulate.pd_spec import (
    Disaggregation,
    check_roles,
    expected_text,
    parse_disaggregation,
    parse_expected_by_role,
    parse_role,
    phase_disaggregation,
)
from exporter.simulate.restarts import ReplicaRestart, parse_restart
from exporter.simulate.waitqueue import POLICIES
from exporter.simulate.workload import LengthSpec, WorkloadSpec
from exporter.stages import ENGINE, of
from exporter.validation import ConfigError

EXPECTED_STAGES = ("none", *(stage.id for stage in of(ENGINE)))
ROUTING_POLICIES = ("round_robin", "least_loaded", "weighted")
TOP_LEVEL_KEYS = (
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
    "nodes",
    "disaggregation",
)
NODE_KEYS = ("gpu", "gpus", "hostname", "driver_version", "nic", "nics", "nic_faults", "gpu_faults")
NIC_KEYS = ("rate_gbps", "link_layer", "latency_us")
REPLICA_GROUP_KEYS = ("model", "count", "tensor_parallel", "nodes", "engine", "role", "engine_type")
#: which engine's /metrics a replica serves (its scheduler is the same simulated one)
ENGINE_TYPES = ("vllm", "sglang")
ROUTING_KEYS = ("policy", "weights")
PHASE_KEYS: tuple[str, ...] = ("name", "start_seconds", "expected_stage", "secondary_stages", "expected_findings")
# expected_by_role and disaggregation: pd_spec.py
PHASE_KEYS += ("note", "workload", "engine", "network", "expected_by_role", "disaggregation", "restart")
NETWORK_KEYS = ("background_utilization", "ecn_mark_fraction")
WORKLOAD_KEYS = (
    "rate_per_second",
    "arrival",
    "burstiness_cv",
    "prompt_tokens",
    "output_tokens",
    "shared_prefix_ratio",
    "prefix_groups",
    "max_tokens",
    "client_timeout_seconds",
    "clients",
    "think_seconds",
)
ARRIVALS = ("poisson", "gamma", "closed")
LENGTH_KEYS = ("mean", "cv", "min", "max")
ENGINE_KEYS = tuple(f.name for f in fields(EngineConfig))
#: engine flags that are fractions of something (memory, peak FLOP/s, peak bandwidth, KV blocks)
FRACTION_KEYS = ("gpu_memory_utilization", "mfu", "mbu", "kv_watermark", "swa_full_tokens_ratio")


@dataclass(frozen=True)
class NodeSpec:
    gpu: GpuSpec
    gpus: int = 8
    hostname: str = "sim-node-0"
    driver_version: str = "550.90.07"
    nic: NicSpec = NicSpec()
    nics: int = 8  # one NIC per GPU (rail-optimized)
    nic_device_prefix: str = "mlx5_"
    nic_faults: tuple[NicFault, ...] = ()
    gpu_faults: tuple[GpuFault, ...] = ()


@dataclass(frozen=True)
class ReplicaGroup:
    model: ModelSpec
    engine: EngineConfig
    count: int = 1
    tensor_parallel: int = 1
    nodes: int = 1
    #: "prefill" or "decode" in a disaggregated scenario (pd_spec.py), "" for a monolithic replica
    role: str = ""
    engine_type: str = "vllm"


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
    #: the node's health findings the exporter must name during the phase (evidence, not stages)
    expected_findings: tuple[ExpectedFinding, ...] = ()
    note: str = ""
    #: (role, stage) where a pool is expected to read another stage than `expected_stage`
    expected_by_role: tuple[tuple[str, str], ...] = ()
    #: the pools' hand-over in this phase (None: a monolithic scenario)
    disaggregation: Disaggregation | None = None
    #: a replica whose process restarts as the phase begins (restarts.py)
    restart: ReplicaRestart | None = None

    def expected_for(self, role: str) -> str:
        """The stage an engine of `role` ("" for a monolithic one) should read in this phase."""
        return dict(self.expected_by_role).get(role, self.expected_stage)


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
    # `nodes:`: this node `count` times, with load weights and events (None: one node)
    cluster: ClusterSpec | None = None

    def phase_at(self, t: float) -> Phase:
        starts = [p.start_seconds for p in self.phases]
        return self.phases[max(0, bisect_right(starts, t) - 1)]

    @property
    def stages_text(self) -> str:
        return " -> ".join(expected_text(p.expected_stage, p.expected_by_role) for p in self.phases)

    @property
    def disaggregation(self) -> Disaggregation | None:
        return self.phases[0].disaggregation


def replace_node(scenario: Scenario, **changes: Any) -> Scenario:
    """The scenario with its node spec changed (a cluster's node gets its own hostname)."""
    return replace(scenario, node=replace(scenario.node, **changes))


# --------------------------------------------------------------------------------------- loading
def builtin_names() -> list[str]:
    folder = resources.files("exporter.simulate") / "scenarios"
    return sorted(entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def cluster_names() -> list[str]:
    """Built-in scenarios of several nodes (`nodes:`), kept apart from the single-node ones."""
    folder = resources.files("exporter.simulate") / "scenarios" / "cluster"
    return sorted(entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def load_scenario(name_or_path: str) -> Scenario:
    """A built-in scenario by name, else a YAML file by path (read within the shared size bounds)."""
    for folder, names in (("scenarios", builtin_names()), ("scenarios/cluster", cluster_names())):
        if name_or_path in names:
            text = (resources.files("exporter.simulate") / folder / f"{name_or_path}.yaml").read_text("utf-8")
            return parse_scenario(text, f"built-in {name_or_path}")
    path = Path(name_or_path)
    if not path.is_file():
        known = ", ".join(builtin_names() + cluster_names())
        raise ConfigError("--scenario", f"{name_or_path!r} is neither a built-in scenario ({known}) nor a file")
    return scenario_from_data(v.load_file(str(path)), str(path))


def parse_scenario(text: str, source: str) -> Scenario:
    """A scenario from YAML text; `source` names it in errors (a path, or "built-in NAME")."""
    return scenario_from_data(v.load_yaml_mapping(text, source), source)


def scenario_from_data(data: dict[str, Any], source: str) -> Scenario:
    """A scenario from its loaded top-level mapping: a file and YAML text load differently (a
    file within the size bound, text as given) but validate here alike."""
    v.known_keys(data, "", TOP_LEVEL_KEYS)
    node = _node(data.get("node", {}))
    groups = tuple(
        _replica_group(item, f"replicas[{i}]")
        for i, item in enumerate(v.non_empty_sequence(v.required(data.get("replicas"), "replicas"), "replicas"))
    )
    used = sum(g.count * max(1, g.tensor_parallel // g.nodes) for g in groups)
    if used > node.gpus:
        raise ConfigError("replicas", f"need {used} GPUs on this node, the node has {node.gpus}")
    routing = _routing(data.get("routing", {}), sum(g.count for g in groups))
    disaggregation = parse_disaggregation(data.get("disaggregation"))
    phases = _phases(
        v.mapping(v.required(data.get("workload"), "workload"), "workload"),
        v.non_empty_sequence(data.get("phases", [{}]), "phases"),
        disaggregation,
        sum(g.count for g in groups),
    )
    check_roles([g.role for g in groups], disaggregation, phases[0].workload.arrival)
    return Scenario(
        name=v.string(data.get("name", Path(source).stem), "name"),
        description=v.string_or_empty(data.get("description"), "description"),
        node=node,
        replicas=groups,
        phases=phases,
        routing=routing,
        seed=v.integer(data.get("seed", 1), "seed"),
        duration_seconds=v.positive_number(data.get("duration_seconds", 600.0), "duration_seconds"),
        warmup_seconds=v.non_negative(data.get("warmup_seconds", 60.0), "warmup_seconds"),
        source=source,
        cluster=None if data.get("nodes") is None else parse_cluster(data["nodes"], node.nics),
    )


def _node(value: Any) -> NodeSpec:
    data = v.section(value, "node", NODE_KEYS)
    gpu = v.choice(data.get("gpu", "h100-sxm"), "node.gpu", tuple(GPUS))
    nic_data = v.section(data.get("nic", {}), "node.nic", NIC_KEYS)
    nic = NicSpec(
        rate_gbps=v.positive_int(nic_data.get("rate_gbps", 400), "node.nic.rate_gbps"),
        link_layer=v.choice(nic_data.get("link_layer", "Ethernet"), "node.nic.link_layer", ("Ethernet", "InfiniBand")),
        latency_seconds=v.positive_number(nic_data.get("latency_us", 8.0), "node.nic.latency_us") / 1e6,
    )
    gpus = v.positive_int(data.get("gpus", 8), "node.gpus")
    nics = v.integer(data.get("nics", gpus), "node.nics", minimum=0)
    return NodeSpec(
        gpu=GPUS[gpu],
        gpus=gpus,
        hostname=v.string(data.get("hostname", "sim-node-0"), "node.hostname"),
        driver_version=v.string(data.get("driver_version", "550.90.07"), "node.driver_version"),
        nic=nic,
        nics=nics,
        nic_faults=parse_nic_faults(data.get("nic_faults", []), nics),
        gpu_faults=parse_gpu_faults(data.get("gpu_faults", []), gpus),
    )


def _replica_group(value: Any, where: str) -> ReplicaGroup:
    data = v.section(value, where, REPLICA_GROUP_KEYS)
    model = MODELS[v.choice(v.required(data.get("model"), f"{where}.model"), f"{where}.model", tuple(MODELS))]
    tp = v.positive_int(data.get("tensor_parallel", 1), f"{where}.tensor_parallel")
    nodes = v.positive_int(data.get("nodes", 1), f"{where}.nodes")
    if tp % nodes:
        raise ConfigError(f"{where}.nodes", f"tensor_parallel {tp} does not split evenly over {nodes} nodes")
    engine = _engine(data.get("engine", {}), f"{where}.engine", ENGINE_KEYS)
    if not engine.chunked_prefill and engine.max_num_batched_tokens < (
        engine.max_model_len or model.max_position_embeddings
    ):
        raise ConfigError(
            f"{where}.engine.max_num_batched_tokens",
            "must be at least max_model_len when chunked_prefill is off (as vLLM requires)",
        )
    role = parse_role(data.get("role"), f"{where}.role")
    if role and tp > 1:
        raise ConfigError(f"{where}.tensor_parallel", "prefill and decode replicas are modelled at tensor_parallel 1")
    engine_type = v.choice(data.get("engine_type", "vllm"), f"{where}.engine_type", ENGINE_TYPES)
    if model.hybrid and engine_type != "sglang":
        raise ConfigError(
            f"{where}.engine_type",
            f"{model.key} is a hybrid sliding-window model: the simulator keeps its two KV pools as SGLang does, "
            "so it runs with engine_type sglang",
        )
    count = v.positive_int(data.get("count", 1), f"{where}.count")
    return ReplicaGroup(model, engine, count, tp, nodes, role, engine_type)


def _engine(value: Any, where: str, allowed: tuple[str, ...]) -> EngineConfig:
    """Engine flags over vLLM's defaults; a phase passes RUNTIME_KEYS (what changes without a restart)."""
    data = v.section(value, where, allowed)
    base = EngineConfig()
    values: dict[str, Any] = {}
    for key, item in data.items():
        default = getattr(base, key)
        at = f"{where}.{key}"
        if key == "scheduling":
            values[key] = v.choice(item, at, POLICIES)
        elif isinstance(default, bool):
            values[key] = v.boolean(item, at)
        elif key == "sleep_level":
            values[key] = v.integer(item, at, minimum=0, maximum=2)
        elif isinstance(default, int):  # 0 is "the model's context length", "no limit"
            zero_allowed = key in ("max_model_len", "max_num_queued_reqs")
            values[key] = v.integer(item, at, minimum=0) if zero_allowed else v.positive_int(item, at)
        else:
            maximum = 1.0 if key in FRACTION_KEYS else None
            values[key] = (
                v.non_negative(item, at, maximum) if key == "kv_watermark" else v.positive_number(item, at, maximum)
            )
    return replace(base, **values)


def _routing(value: Any, replicas: int) -> Routing:
    data = v.section(value, "routing", ROUTING_KEYS)
    policy = v.choice(data.get("policy", "round_robin"), "routing.policy", ROUTING_POLICIES)
    weights = tuple(
        v.non_negative(w, f"routing.weights[{i}]")
        for i, w in enumerate(v.sequence(data.get("weights", []), "routing.weights"))
    )
    if policy == "weighted" and len(weights) != replicas:
        raise ConfigError("routing.weights", f"needs one weight per replica ({replicas}), got {len(weights)}")
    return Routing(policy, weights)


def _phases(
    base_workload: dict[str, Any], items: list[Any], disaggregation: Disaggregation | None, replicas: int
) -> tuple[Phase, ...]:
    phases: list[Phase] = []
    workload = copy.deepcopy(base_workload)
    engine: dict[str, Any] = {}
    network: dict[str, Any] = {}
    for index, item in enumerate(items):
        where = f"phases[{index}]"
        data = v.section(item, where, PHASE_KEYS)
        start = v.non_negative(data.get("start_seconds", 0.0), f"{where}.start_seconds")
        if index == 0 and start != 0:
            raise ConfigError(f"{where}.start_seconds", "the first phase starts at 0")
        if phases and start <= phases[-1].start_seconds:
            raise ConfigError(f"{where}.start_seconds", "phases must start in increasing order")
        workload = _merge(workload, v.mapping(data.get("workload", {}), f"{where}.workload"))
        engine_data = v.mapping(data.get("engine", {}), f"{where}.engine")
        _engine(engine_data, f"{where}.engine", RUNTIME_KEYS)  # validates the change; applied at run time
        engine = {**engine, **engine_data}
        network = {**network, **v.section(data.get("network", {}), f"{where}.network", NETWORK_KEYS)}
        disaggregation = phase_disaggregation(data.get("disaggregation", {}), f"{where}.disaggregation", disaggregation)
        if phases and (workload.get("arrival") == "closed") != (phases[0].workload.arrival == "closed"):
            # The clients in flight would have nowhere to go, and a rate nobody to send it.
            raise ConfigError(
                f"{where}.workload.arrival", "a closed population and open arrivals cannot follow each other"
            )
        phase_workload = _workload(workload, f"{where}.workload" if data.get("workload") else "workload")
        phases.append(
            Phase(
                name=v.string(data.get("name", f"phase-{index}"), f"{where}.name"),
                start_seconds=start,
                expected_stage=v.choice(data.get("expected_stage", "none"), f"{where}.expected_stage", EXPECTED_STAGES),
                secondary_stages=tuple(
                    v.choice(s, f"{where}.secondary_stages[{i}]", EXPECTED_STAGES)
                    for i, s in enumerate(v.sequence(data.get("secondary_stages", []), f"{where}.secondary_stages"))
                ),
                expected_findings=parse_expected_findings(
                    data.get("expected_findings", []), f"{where}.expected_findings"
                ),
                note=v.string_or_empty(data.get("note"), f"{where}.note"),
                workload=phase_workload,
                network=NetworkCondition.from_data(network, f"{where}.network"),
                engine_changes={-1: dict(engine)} if engine else {},
                expected_by_role=parse_expected_by_role(
                    data.get("expected_by_role", {}), f"{where}.expected_by_role", EXPECTED_STAGES
                ),
                disaggregation=disaggregation,
                restart=parse_restart(data.get("restart"), f"{where}.restart", replicas, index, disaggregation),
            )
        )
    return tuple(phases)


def _workload(data: dict[str, Any], where: str) -> WorkloadSpec:
    """One phase's load. Open arrivals (poisson, gamma) need `rate_per_second`; a closed population
    needs `clients` (and may set `think_seconds`) and takes no rate: it follows from the latency."""
    v.known_keys(data, where, WORKLOAD_KEYS)
    max_tokens = data.get("max_tokens")
    timeout = data.get("client_timeout_seconds")
    arrival = v.choice(data.get("arrival", "poisson"), f"{where}.arrival", ARRIVALS)
    rate_at = f"{where}.rate_per_second"
    if arrival == "closed":
        if "rate_per_second" in data:
            raise ConfigError(rate_at, "not used with arrival closed: the rate follows from clients and think_seconds")
        rate = 0.0
        clients = v.integer(v.required(data.get("clients"), f"{where}.clients"), f"{where}.clients", minimum=0)
        think = v.non_negative(data.get("think_seconds", 0.0), f"{where}.think_seconds")
    else:
        for key in ("clients", "think_seconds"):
            if key in data:
                raise ConfigError(f"{where}.{key}", "only with arrival closed")
        rate = v.non_negative(v.required(data.get("rate_per_second"), rate_at), rate_at)
        clients, think = 0, 0.0
    return WorkloadSpec(
        rate_per_second=rate,
        prompt_tokens=_length(data.get("prompt_tokens"), f"{where}.prompt_tokens"),
        output_tokens=_length(data.get("output_tokens"), f"{where}.output_tokens"),
        arrival=arrival,
        burstiness_cv=v.positive_number(data.get("burstiness_cv", 1.0), f"{where}.burstiness_cv"),
        shared_prefix_ratio=v.non_negative(data.get("shared_prefix_ratio", 0.0), f"{where}.shared_prefix_ratio", 0.99),
        prefix_groups=v.positive_int(data.get("prefix_groups", 1), f"{where}.prefix_groups"),
        max_tokens=None if max_tokens is None else v.positive_int(max_tokens, f"{where}.max_tokens"),
        client_timeout_seconds=None
        if timeout is None
        else v.positive_number(timeout, f"{where}.client_timeout_seconds"),
        clients=clients,
        think_seconds=think,
    )


def _length(value: Any, where: str) -> LengthSpec:
    data = v.section(v.required(value, where), where, LENGTH_KEYS)
    spec = LengthSpec(
        mean=v.positive_number(v.required(data.get("mean"), f"{where}.mean"), f"{where}.mean"),
        cv=v.non_negative(data.get("cv", 0.5), f"{where}.cv"),
        min=v.positive_int(data.get("min", 1), f"{where}.min"),
        max=v.positive_int(data.get("max", 1_000_000), f"{where}.max"),
    )
    if spec.min > spec.max:
        raise ConfigError(f"{where}.min", f"{spec.min} is above max {spec.max}")
    return spec


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A phase's change over what earlier phases set: nested mappings merge, anything else replaces."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged
