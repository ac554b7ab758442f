"""Settings: plain frozen dataclasses, the one place every default is stated.

This module imports nothing of the exporter's (it is the bottom layer): `config.py` turns YAML and
flags into these records, and each source, discovery and attribution receives only the record it
uses, never the whole configuration. docs/configuration.md is checked against these defaults
(tests/unit/test_config_docs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

DEFAULT_POD_RESOURCES_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
LOG_LEVELS = ("debug", "info", "warning", "error")
#: the dimensions a target's series can be sliced by (exporter/slicing.py)
SLICE_DIMENSIONS = ("tenant", "adapter", "priority")


def field_names(record: Any) -> tuple[str, ...]:
    """The keys of a settings record's YAML section: its dataclass fields, in order, so a field
    added to a record is a key `check-config` accepts with no second list to keep in step."""
    return tuple(f.name for f in fields(record))


@dataclass(frozen=True)
class ScrapeLimits:
    """Bounds on one HTTP scrape (`engine_defaults:`, or per engine): time, bytes and series."""

    timeout_seconds: float = 2.0
    max_response_bytes: int = 16 * 1024 * 1024
    max_series: int = 10_000
    max_label_value_length: int = 1024
    # The output side (exporter/budget.py): `max_series` bounds what is read, these what is exported.
    # One model exports at most ~29 series (8 gauges and counters, 4 summaries of 5), so 10 models
    # fit in 300; the documented node (8 engines) stays near its 1,500-series budget with one or two each.
    max_models: int = 10
    max_exported_series: int = 300
    # Slices (exporter/slicing.py): per dimension, the wire labels that name a slice, first present
    # wins, and how many values each dimension keeps before folding the rest into `other`.
    slice_labels: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("tenant", ("tenant", "fairness_id", "team_alias", "api_key_alias")),
        ("adapter", ("adapter", "lora_name")),
        ("priority", ("priority",)),
    )
    max_slices_per_dimension: int = 10


@dataclass(frozen=True)
class ScrapeAuth:
    """Credentials for one engine's scrapes, as a Prometheus scrape config states them.

    Files are read at each scrape (re-read only when they change), so a rotated token needs no
    reload. Per engine only: `engine_defaults` also applies to discovered pods, and a credential
    must not go to whatever pod an annotation points at.
    """

    username: str | None = None
    password: str | None = field(default=None, repr=False)  # never in a repr, hence never logged
    password_file: str | None = None
    bearer_token_file: str | None = None


@dataclass(frozen=True)
class EngineTarget:
    """One engine endpoint, configured or discovered; `name` is the `engine` label value."""

    url: str
    name: str
    type: str | None = None
    model: str | None = None
    limits: ScrapeLimits = field(default_factory=ScrapeLimits)
    #: labels added to every series of this engine (`pod`, `namespace`, `container` when discovered)
    labels: tuple[tuple[str, str], ...] = ()
    #: discovered targets never follow a redirect: it could point anywhere, not at the pod
    follow_redirects: bool = True
    #: `basic_auth` / `bearer_token_file` of this engine (none by default)
    auth: ScrapeAuth = field(default_factory=ScrapeAuth)
    #: the endpoints of this engine's other ranks or nodes (exporter/sources/engine_urls.py)
    rank_urls: tuple[str, ...] = ()
    #: its part of a disaggregated deployment where the operator states it (`role:`, or the pod's
    #: role label or annotation); None: from the engine's own series (docs/metrics.md, "Roles")
    role: str | None = None
    #: where `role` was stated: "configuration" or "kubernetes"
    role_source: str = "configuration"


#: the roles an engine may be given (`engines[].role`, the pod's role annotation)
ENGINE_ROLES = ("unified", "prefill", "decode", "encode")


@dataclass(frozen=True)
class GatewayTarget:
    """One gateway's metrics endpoint (`gateways:`, `--gateway`); `name` is the `gateway` label."""

    url: str
    name: str
    type: str | None = None
    limits: ScrapeLimits = field(default_factory=ScrapeLimits)
    auth: ScrapeAuth = field(default_factory=ScrapeAuth)
    #: names of the engines behind it; empty means every configured engine of this node
    engines: tuple[str, ...] = ()
    #: HOST:PORT where the exporter receives this gateway's access log as syslog over UDP
    #: (HAProxy's `log` with `option httplog`): per-request timings, so latency histograms of a
    #: gateway whose own metrics have only averages (exporter/sources/access_log.py)
    access_log: str | None = None


@dataclass(frozen=True)
class ProbeTarget:
    """One active probe (`probes:`): a tiny streamed completion through the gateway, and direct."""

    name: str
    url: str  # an OpenAI-compatible base URL through the gateway (…/v1)
    model: str
    direct_url: str | None = None  # the engine behind it, to compare with
    #: the gateway (by name) the probe goes through; None: the only one configured, if one
    gateway: str | None = None
    max_tokens: int = 4
    interval_seconds: float = 30.0
    timeout_seconds: float = 5.0  # at most interval_seconds, so one probe ends before the next
    #: a file holding the API key the gateway wants (LiteLLM's virtual keys), sent as a bearer token
    #: on the gateway path only; re-read at each probe
    bearer_token_file: str | None = None


@dataclass(frozen=True)
class PlannerTarget:
    """An autoscaling planner's metrics endpoint (`planners:`): NVIDIA Dynamo's planner, whose
    recommended replicas and estimated latencies are read beside the exporter's own."""

    url: str
    name: str
    #: the model it plans for, where its series carry no `model_name` label
    model: str | None = None
    limits: ScrapeLimits = field(default_factory=ScrapeLimits)
    auth: ScrapeAuth = field(default_factory=ScrapeAuth)


@dataclass(frozen=True)
class GpuSettings:
    """Which GPU source to run (`--gpu`, `dcgm_address`)."""

    mode: str = "auto"
    url: str | None = None  # for the modes that ingest another exporter (`MODE=URL`)
    #: DCGM host engine; "embedded" starts one in-process
    dcgm_address: str = "localhost:5555"


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
class KubernetesSettings:
    """The `kubernetes:` section (docs/deployment.md, "Let the exporter find your engines")."""

    enabled: bool = False
    #: this node's name; None means the NODE_NAME environment variable (set from spec.nodeName)
    node_name: str | None = None
    #: the API server; None means in-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
    api_url: str | None = None
    token_file: str = f"{SERVICE_ACCOUNT_DIR}/token"
    ca_file: str = f"{SERVICE_ACCOUNT_DIR}/ca.crt"
    #: a full list at least this often, besides the watch, so a missed event cannot last
    resync_seconds: float = 300.0
    #: the most pods scraped at once (annotations are written by whoever deploys pods)
    max_engines: int = 32
    #: scrape limits of each discovered engine, from `engine_defaults`
    limits: ScrapeLimits = field(default_factory=ScrapeLimits)


@dataclass(frozen=True)
class Thresholds:
    """Diagnosis thresholds (`diagnosis:`), each with where its default comes from.

    The running exporter scores against these, and `generate` reads the same section of the
    deployed configuration for the alert rules and dashboards, so a page and its graph agree.
    """

    # Autoscaler conventions: Gateway API inference extension (queueThresholdCritical = 5) and
    # llm-d WVA (queueLengthThreshold = 5) call a replica saturated at 5 waiting requests.
    waiting_requests: float = 5.0
    # The same projects use KV usage 0.8 as the saturation line; vllm-doctor flags 0.9.
    kv_usage_warning: float = 0.8
    kv_usage_critical: float = 0.95
    # vllmstat/vllm-doctor: any sustained preemption is a capacity problem; 0.05/s is their rate line.
    preemptions_per_second: float = 0.05
    # NVIDIA DCGM profiling guidance: DRAM active tops out near 0.8 in practice.
    dram_active_saturated: float = 0.8
    dram_active_busy: float = 0.6
    # DCGM: SM active below 0.5 "likely indicates ineffective GPU usage".
    sm_active_ineffective: float = 0.5
    # A tensor pipe busy most cycles means the step is compute-bound (prefill).
    tensor_active_high: float = 0.5
    # vllm-doctor flags TTFT p95 ≥ 2 s and TPOT p95 ≥ 0.2 s; we look at changes against the
    # engine's own baseline first, these absolute lines are the fallback.
    ttft_p95_seconds: float = 2.0
    itl_p95_seconds: float = 0.2
    # ITL up this many times over the engine's recent best means decode slowed down.
    itl_slowdown_ratio: float = 2.0
    # RDMA: link utilization near the rate, and congestion notifications.
    rdma_utilization_high: float = 0.8
    cnp_per_second: float = 1000.0
    retransmissions_per_second: float = 10.0
    # One Python scheduler thread saturates one core; 0.9 of a core is "at its limit".
    engine_cpu_cores_busy: float = 0.9
    # Hysteresis: a stage turns active at `enter` and stays active until it falls below `exit`.
    enter_score: float = 0.6
    exit_score: float = 0.4
    # Levels are averaged over `level_seconds`; trends compare against the best over `baseline_seconds`.
    level_seconds: float = 30.0
    baseline_seconds: float = 600.0


#: the latency dimensions an SLO may bound; each is one engine histogram (docs/slo.md)
SLO_DIMENSIONS = ("ttft", "itl", "e2e")


@dataclass(frozen=True)
class SloTarget:
    """One latency SLO (`slos:`): which engines and models it covers, its thresholds (any subset
    of the dimensions) and the fraction of requests that must meet them.

    `objective` 0.95 with `ttft_seconds` 1 reads "P95 of time to first token at most 1 s". The
    selectors match a value exactly, else as a fully anchored regular expression; None matches all.
    """

    name: str
    objective: float
    model: str | None = None
    engine: str | None = None
    ttft_seconds: float | None = None
    itl_seconds: float | None = None
    e2e_seconds: float | None = None

    def thresholds(self) -> tuple[tuple[str, float], ...]:
        """(dimension, seconds) for each threshold this SLO sets, in SLO_DIMENSIONS order."""
        values = (self.ttft_seconds, self.itl_seconds, self.e2e_seconds)
        return tuple((d, t) for d, t in zip(SLO_DIMENSIONS, values) if t is not None)


@dataclass(frozen=True)
class CapacitySettings:
    """Decisions from the capacity estimate (`capacity:`, docs/capacity.md): replicas, the
    concurrency to run at and what a request costs."""

    #: the share of a replica's capacity under the SLO an autoscaler should fill: replicas are
    #: added before the SLO breaks (HPA's and KEDA's targets read the same way)
    target_utilization: float = 0.8
    #: the desired replicas fall only when they have been lower for this long (HPA's scale-down
    #: stabilization window, 300 s by default there too): a dip in load does not drop a replica
    scale_down_stabilization_seconds: float = 300.0
    #: a configured concurrency this far (as a fraction) above or below the recommended one is
    #: reported as an action
    concurrency_tolerance: float = 0.25
    #: engine name -> the max_num_seqs it runs with, where the engine does not export it (vLLM)
    max_num_seqs: Mapping[str, int] = field(default_factory=dict)
    #: price of one GPU-hour by GPU model (the `gpu_model` label), `default` for any other; empty:
    #: no cost figures
    gpu_hour_price: Mapping[str, float] = field(default_factory=dict)


#: `otlp.senders`: spans only from an engine's own address, or from any client the web config lets in
OTLP_SENDERS = ("engines", "any")
#: `otlp.models`: spans only for models the engines' own series report, or any model of a known engine
OTLP_MODELS = ("known", "any")


@dataclass(frozen=True)
class OtlpSettings:
    """The opt-in OTLP/HTTP receiver of engine request spans (`otlp:`, docs/slo.md).

    Off unless `listen` is set. Behind the web config (`web_config_file`, else the top-level one):
    TLS and basic auth as for `/metrics`. Bounded: a body over `max_body_bytes` is refused (413)
    before it is read, each client address may send `max_client_bytes_per_second` (429 past it,
    the body unread), spans past `max_spans_per_second` are dropped and counted, and at most
    `max_requests` request records are kept (the oldest go first). Spans are admitted only from a
    known engine's address, for a model its own series report (`senders`, `models`).
    """

    listen: str | None = None  # HOST:PORT; OTLP/HTTP's port is 4318
    #: TLS and basic auth of the receiver; None: the top-level `web_config_file`
    web_config_file: str | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    max_client_bytes_per_second: int = 4 * 1024 * 1024
    max_spans_per_second: float = 2000.0
    max_requests: int = 100_000
    senders: str = "engines"
    models: str = "known"


@dataclass(frozen=True)
class HealthSettings:
    """`health:`, the node's own health (docs/health.md): the lines its findings are judged by.

    Published thresholds are the defaults where one exists (NVSentinel's NIC monitor, GPUd); the
    others say why they are where they are."""

    #: seconds between reads of link state, PCIe links and RoCE configuration (they change rarely)
    refresh_seconds: float = 30.0
    #: the rate every InfiniBand/RoCE port should run at (Gb/s); None: the node's most common rate
    expected_port_rate_gbps: float | None = None
    #: the priority RoCE traffic uses: ECN must be on there (NVIDIA's lossless default is 3)
    roce_priority: int = 3
    #: the QoS trust mode the fabric expects ("dscp", "pcp"); None: not judged
    expected_trust: str | None = None
    #: a GPU this busy (SM active or utilization) is judged for PCIe: idle GPUs train down by design
    gpu_busy_ratio: float = 0.1
    #: NVSentinel: link_error_recovery above 5 per minute is a flapping link
    link_error_recovery_per_minute: float = 5.0
    #: NVSentinel: symbol_error above 120 per hour (a bit error rate of about 1e-12) or 10 per second
    symbol_errors_per_hour: float = 120.0
    #: share of the time a priority may be paused by PFC before the port is in a pause storm
    pause_time_ratio: float = 0.1
    #: after a start or a wake, how long the engine is cold: its slowdowns are its warm-up
    warmup_seconds: float = 60.0
    #: spread (coefficient of variation) of time per output token over the window that is jitter
    #: (the framework's "more than 15 %")
    jitter_ratio: float = 0.15
    #: full (generation 2) garbage collections per minute that stall token output
    gc_full_collections_per_minute: float = 1.0
    #: share of the engine cgroup's CPU periods throttled by its quota
    cpu_throttled_ratio: float = 0.05
    #: share of the node's CPU time stolen by the hypervisor
    cpu_steal_ratio: float = 0.05


#: the longest profile a capture takes (`profile.seconds`, `profile --seconds`): the engine's
#: profiler slows every step while on, and its trace grows with each
MAX_PROFILE_SECONDS = 120.0


@dataclass(frozen=True)
class ProfileSettings:
    """`profile:`, automatic captures through the engine's own profiler (docs/health.md,
    "Profiles"). Off by default: a capture slows the engine while it runs and writes a trace of
    hundreds of MB, so it is taken only where the operator asked for it and a stage has held."""

    auto: bool = False
    #: how long a stage must have been an engine's primary bottleneck before a capture: a
    #: moment's verdict is not worth a trace
    after_seconds: float = 300.0
    #: at most one capture per engine in this long, whatever its outcome
    min_interval_seconds: float = 3600.0
    #: the length of each capture (at most MAX_PROFILE_SECONDS)
    seconds: float = 10.0
    #: where the engine writes its traces; None: read from the engine (vLLM's --profiler-config)
    trace_dir: str | None = None
    #: the stages that may start one; empty: every engine stage
    stages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Config:
    """The whole exporter configuration; only the composition root (app.py) reads all of it."""

    listen_host: str = "0.0.0.0"
    listen_port: int = 9477
    interval_seconds: float = 5.0
    window_seconds: float = 60.0
    gpu: GpuSettings = field(default_factory=GpuSettings)
    sysfs: str = "/sys"
    log_level: str = "info"
    engine_defaults: ScrapeLimits = field(default_factory=ScrapeLimits)
    engines: tuple[EngineTarget, ...] = ()
    thresholds: Thresholds = field(default_factory=Thresholds)
    gpu_attribution: GpuAttribution = field(default_factory=GpuAttribution)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)  # engine discovery
    web_config_file: str | None = None  # TLS and basic auth (exporter-toolkit format)
    #: the node-wide cap on exported series (exporter/budget.py): 32 discovered engines at their
    #: per-target cap, plus GPUs, RDMA ports and the host, still fit
    max_exported_series: int = 10_000
    gateways: tuple[GatewayTarget, ...] = ()
    probes: tuple[ProbeTarget, ...] = ()
    #: latency SLOs (`slos:`): attainment, goodput and capacity headroom per SLO (docs/slo.md)
    slos: tuple[SloTarget, ...] = ()
    #: per-request spans for joint attainment and the request mix (`otlp:`); off by default
    otlp: OtlpSettings = field(default_factory=OtlpSettings)
    #: replicas, concurrency and cost from the capacity estimate (`capacity:`)
    capacity: CapacitySettings = field(default_factory=CapacitySettings)
    #: autoscaling planners read beside the exporter's own figures (`planners:`)
    planners: tuple[PlannerTarget, ...] = ()
    #: the node's own health: links, fabric configuration, starts, host pauses (`health:`)
    health: HealthSettings = field(default_factory=HealthSettings)
    #: automatic profile captures when a stage holds (`profile:`); off by default
    profile: ProfileSettings = field(default_factory=ProfileSettings)

    @property
    def listen(self) -> str:
        host = f"[{self.listen_host}]" if ":" in self.listen_host else self.listen_host
        return f"{host}:{self.listen_port}"
