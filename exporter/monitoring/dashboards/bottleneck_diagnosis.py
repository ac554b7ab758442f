"""Bottleneck diagnosis: the framework top to bottom, one row per stage, as the runbooks walk it.

Each row holds the stage's score from the exporter's diagnosis (line at `enter_score`, where the
stage turns active) and the evidence that proves or rules the stage out, with the diagnosis' own
lines drawn on it. Above the rows, the primary stage of every engine over time and the stages
active now. The ingress row scores the path before the engine per gateway (ingress,
client_network) and splits its latency by window means: client network, gateway, hop, engine.
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.cluster_overview import active_bottlenecks_table
from exporter.monitoring.dashboards.panels import (
    COUNT,
    CPU_CORES,
    PER_SECOND,
    RATIO,
    REQUESTS_PER_SECOND,
    SCORE,
    SECONDS,
    TOKENS_PER_SECOND,
    Line,
    PanelDef,
    Query,
    state_timeline,
    text,
    timeseries,
    value_mappings,
)
from exporter.monitoring.dashboards.queries import STAGE_TITLES, Scope, stage_mappings

UID = "llm-bottleneck-diagnosis"
TITLE = "LLM serving / Bottleneck diagnosis"
VARIABLES = ("datasource", "cluster", "namespace", "node", "model", "engine")

READING = """\
Walk it top to bottom, as every runbook does: **ingress → queueing → prefill → decode → KV cache →
network → host**. Each row starts with the stage's score (0-1) from the exporter's diagnosis — the
dashed line is `diagnosis.enter_score`, where the stage turns active and its alert can fire — and
continues with the evidence that proves or rules the stage out, with the same lines the diagnosis
uses. Decide from several signals together, never from GPU utilization alone: in the seed case SM
active was 45 % while DRAM active was 95 % — decode was memory-bandwidth-bound, not idle."""

INGRESS = """\
Scored per **gateway** (`gateways:`, probes through it in `probes:`): *ingress* when the gateway's
5xx, queue or own time rise while its engines are healthy; *client_network* when the probe through
the gateway is slow while the gateway and the engine are fast. The latency split is made from
means over one window (never from quantiles): client → gateway, the gateway itself, gateway →
engine, the engine. A 502/503 from a dead engine is the engine's (see its row), not ingress."""


def score(s: Scope, config: MonitoringConfig, stage: str, width: int = 6) -> PanelDef:
    d = config.diagnosis
    return timeseries(
        f"Score: {STAGE_TITLES[stage]}",
        Query(s.stage_score(stage), "{{engine}}"),
        unit=SCORE,
        min=0,
        max=1,
        lines=(
            Line(d.exit_score, "orange", "diagnosis.exit_score"),
            Line(d.enter_score, "red", "diagnosis.enter_score"),
        ),
        width=width,
        key=f"score-{stage}",
        description=f"The exporter's {stage} score per engine: "
        "active from enter_score until it falls below exit_score.",
    )


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    d = config.diagnosis
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    per_engine = s.by_node("engine")
    per_node = s.by_node()

    def engine_quantile(family: str) -> str:
        return s.quantile(family, "0.95", per_engine)

    b.top(
        text("How to read this dashboard", READING, width=24, height=4, key="how-to-read"),
        state_timeline(
            "Primary bottleneck per engine",
            Query(s.primary_stage_code(), "{{engine}}"),
            mappings=value_mappings(stage_mappings()),
            width=16,
            height=9,
            description="The stage the exporter ranks first for each engine (none when no stage is active).",
        ),
        active_bottlenecks_table(s, "Active stages", width=8, height=9),
    )
    per_gateway = s.by_node("gateway")
    server_errors = s.rate("llm_gateway_requests_total", 'code_class="5xx"')
    b.row(
        "1 · Ingress / client network",
        text("Ingress: what to compare", INGRESS, width=6, key="ingress-how"),
        timeseries(
            "Score: ingress and client network",
            Query(
                f"max {s.by_node('gateway', 'stage')} ({s('llm_gateway_bottleneck_score')})", "{{gateway}} {{stage}}"
            ),
            unit=SCORE,
            min=0,
            max=1,
            lines=(
                Line(d.exit_score, "orange", "diagnosis.exit_score"),
                Line(d.enter_score, "red", "diagnosis.enter_score"),
            ),
            width=6,
            key="score-ingress",
            rare="a gateway is configured (gateways:, probes:)",
            description="The exporter's ingress and client_network scores per gateway.",
        ),
        timeseries(
            "Latency before and in the engine (window means)",
            Query(
                f"max {s.by_node('gateway', 'component')} ({s('llm_gateway_latency_component_seconds')})",
                "{{gateway}} {{component}}",
            ),
            unit=SECONDS,
            width=6,
            key="ingress-components",
            rare="a gateway is configured (gateways:, probes:)",
            description="Mean seconds per request in each part of the path: client_to_gateway, gateway, "
            "gateway_to_engine, engine.",
        ),
        timeseries(
            "Gateway 5xx by code",
            Query(
                f"sum {s.by_node('gateway', 'code')} ({server_errors})",
                "{{gateway}} {{code}}",
            ),
            unit=REQUESTS_PER_SECOND,
            width=6,
            key="gateway-errors",
            rare="a gateway is configured (gateways:, probes:)",
            description="Server errors the gateway answered; code is 502/503/504 where it reports single codes.",
        ),
        timeseries(
            "Probe end-to-end p95 by path",
            Query(
                s.quantile("llm_probe_e2e_latency_seconds", "0.95", s.by_node("probe", "path")), "{{probe}} {{path}}"
            ),
            unit=SECONDS,
            width=8,
            key="probe-e2e",
            rare="a gateway is configured (gateways:, probes:)",
            description="The prober's tiny streamed completion, as a client sees it: through the gateway and direct.",
        ),
        timeseries(
            "Engine end-to-end latency p95",
            Query(engine_quantile("llm_engine_e2e_request_latency_seconds"), "{{engine}}"),
            unit=SECONDS,
            width=8,
        ),
        timeseries(
            "Requests queued at the gateway",
            Query(f"sum {per_gateway} ({s('llm_gateway_requests_queued')})", "{{gateway}}"),
            unit=COUNT,
            width=8,
            key="gateway-queued",
            rare="a gateway is configured (gateways:, probes:)",
        ),
    )
    b.row(
        "2 · Queueing",
        score(s, config, "queueing"),
        timeseries(
            "Waiting requests",
            Query(f"sum {per_engine} ({s('llm_engine_requests_waiting')})", "{{engine}}"),
            unit=COUNT,
            lines=(Line(d.waiting_requests, "red", "diagnosis.waiting_requests"),),
            width=6,
        ),
        timeseries(
            "Queue time p95",
            Query(engine_quantile("llm_engine_queue_time_seconds"), "{{engine}}"),
            unit=SECONDS,
            width=6,
        ),
        timeseries(
            "Time to first token p95",
            Query(engine_quantile("llm_engine_time_to_first_token_seconds"), "{{engine}}"),
            unit=SECONDS,
            lines=(Line(d.ttft_p95_seconds, "red", "diagnosis.ttft_p95_seconds"),),
            width=6,
            description="Queueing: TTFT rises with queue time while inter-token latency stays normal.",
        ),
    )
    b.row(
        "3 · Prefill",
        score(s, config, "prefill_compute"),
        timeseries(
            "Tensor active of the engine's GPUs",
            Query(f"max {per_engine} ({s('llm_gpu_tensor_active_ratio')})", "{{engine}}"),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(d.tensor_active_high, "red", "diagnosis.tensor_active_high"),),
        ),
        timeseries(
            "Prompt tokens/s",
            Query(f"sum {per_engine} ({s.rate('llm_engine_prompt_tokens_total')})", "{{engine}}"),
            unit=TOKENS_PER_SECOND,
            width=6,
        ),
        timeseries(
            "Prefill time p95 (TTFT minus queue time)",
            Query(
                f"{engine_quantile('llm_engine_time_to_first_token_seconds')}\n-\n"
                f"{engine_quantile('llm_engine_queue_time_seconds')}",
                "{{engine}}",
            ),
            unit=SECONDS,
            width=6,
            description="Prefill, not queueing: this is most of the time to first token.",
        ),
    )
    b.row(
        "4 · Decode",
        score(s, config, "decode_memory_bandwidth"),
        timeseries(
            "DRAM vs SM active of the engine's GPUs",
            Query(f"max {per_engine} ({s('llm_gpu_dram_active_ratio')})", "{{engine}} DRAM"),
            Query(f"avg {per_engine} ({s('llm_gpu_sm_active_ratio')})", "{{engine}} SM"),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(
                Line(d.dram_active_busy, "orange", "diagnosis.dram_active_busy"),
                Line(d.dram_active_saturated, "red", "diagnosis.dram_active_saturated"),
            ),
            description="Memory-bandwidth-bound decode: DRAM near its practical peak while SM activity is "
            "moderate. Low SM activity here is not idle capacity.",
        ),
        timeseries(
            "Inter-token latency p95",
            Query(engine_quantile("llm_engine_inter_token_latency_seconds"), "{{engine}}"),
            unit=SECONDS,
            lines=(Line(d.itl_p95_seconds, "red", "diagnosis.itl_p95_seconds"),),
            width=6,
        ),
        timeseries(
            "Generated tokens/s",
            Query(f"sum {per_engine} ({s.rate('llm_engine_generation_tokens_total')})", "{{engine}}"),
            unit=TOKENS_PER_SECOND,
            width=6,
        ),
    )
    b.row(
        "5 · KV cache",
        score(s, config, "kv_cache_capacity", width=4),
        timeseries(
            "KV cache usage",
            Query(f"max {per_engine} ({s('llm_engine_kv_cache_usage_ratio')})", "{{engine}}"),
            unit=RATIO,
            min=0,
            max=1,
            width=5,
            lines=(
                Line(d.kv_usage_warning, "orange", "diagnosis.kv_usage_warning"),
                Line(d.kv_usage_critical, "red", "diagnosis.kv_usage_critical"),
            ),
        ),
        timeseries(
            "Preemptions/s",
            Query(f"sum {per_engine} ({s.rate('llm_engine_preemptions_total')})", "{{engine}}"),
            unit=PER_SECOND,
            width=5,
            lines=(Line(d.preemptions_per_second, "red", "diagnosis.preemptions_per_second"),),
        ),
        timeseries(
            "Running vs waiting",
            Query(f"sum {per_engine} ({s('llm_engine_requests_running')})", "{{engine}} running"),
            Query(f"sum {per_engine} ({s('llm_engine_requests_waiting')})", "{{engine}} waiting"),
            unit=COUNT,
            width=5,
            key="kv-running-vs-waiting",
            description="A full KV cache caps running below max_num_seqs while waiting grows.",
        ),
        timeseries(
            "Prefix-cache hit ratio",
            Query(f"max {per_engine} ({s('llm_engine_prefix_cache_hit_ratio')})", "{{engine}}"),
            unit=RATIO,
            min=0,
            max=1,
            width=5,
            description="Shared prompt prefixes served from cache; a low ratio with long shared prompts "
            "means prefix caching is off or ineffective.",
        ),
    )
    b.row(
        "6 · Network",
        score(s, config, "cross_node_communication", width=4),
        *rdma_node_evidence(s, config, width=5),
    )
    b.row(
        "7 · Host",
        score(s, config, "host_overhead"),
        timeseries(
            "SM active and GPU busy of the engine's GPUs",
            Query(f"avg {per_engine} ({s('llm_gpu_sm_active_ratio')})", "{{engine}} SM active"),
            Query(f"avg {per_engine} ({s('llm_gpu_utilization_ratio')})", "{{engine}} GPU busy"),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(d.sm_active_ineffective, "orange", "diagnosis.sm_active_ineffective"),),
            description="Host overhead: the GPUs idle between steps while requests run. Busy DRAM rules it out "
            "(that is decode bandwidth).",
        ),
        timeseries(
            "Engine process CPU",
            Query(f"sum {per_engine} ({s.rate('llm_engine_process_cpu_seconds_total')})", "{{engine}}"),
            unit=CPU_CORES,
            width=6,
            lines=(Line(d.engine_cpu_cores_busy, "red", "diagnosis.engine_cpu_cores_busy"),),
            description="One Python scheduler thread saturates one core.",
        ),
        timeseries(
            "Host CPU",
            Query(f"max {per_node} ({s('llm_host_cpu_overall_utilization_ratio')})", f"{{{{{s.node}}}}} all CPUs"),
            Query(f"max {per_node} ({s('llm_host_cpu_utilization_ratio')})", f"{{{{{s.node}}}}} busiest CPU"),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
        ),
    )
    return b


def rdma_node_evidence(s: Scope, config: MonitoringConfig, width: int) -> tuple[PanelDef, ...]:
    """Per node, the RDMA figures the diagnosis compares with its lines (it sums over ports)."""
    d = config.diagnosis
    per_node = s.by_node()
    node = f"{{{{{s.node}}}}}"
    return (
        timeseries(
            "RDMA link utilization (busiest port)",
            Query(f"max {per_node} ({s('llm_rdma_port_transmit_utilization_ratio')})", f"{node} transmit"),
            Query(f"max {per_node} ({s('llm_rdma_port_receive_utilization_ratio')})", f"{node} receive"),
            unit=RATIO,
            min=0,
            max=1,
            width=width,
            lines=(Line(d.rdma_utilization_high, "red", "diagnosis.rdma_utilization_high"),),
        ),
        timeseries(
            "Congestion notifications per node (CNP handled + sent)",
            Query(
                f"sum {per_node} ({s.rate('llm_rdma_port_cnp_handled_total')})\n+\n"
                f"sum {per_node} ({s.rate('llm_rdma_port_cnp_sent_total')})",
                node,
            ),
            unit=PER_SECOND,
            width=width,
            key="cnp-per-node",
            lines=(Line(d.cnp_per_second, "red", "diagnosis.cnp_per_second"),),
        ),
        timeseries(
            "Retransmissions per node",
            Query(f"sum {per_node} ({s.rate('llm_rdma_port_retransmissions_total')})", node),
            unit=PER_SECOND,
            width=width,
            lines=(Line(d.retransmissions_per_second, "red", "diagnosis.retransmissions_per_second"),),
        ),
        timeseries(
            "Transmit wait per node",
            Query(f"sum {per_node} ({s.rate('llm_rdma_port_transmit_wait_total')})", node),
            unit=PER_SECOND,
            width=width,
            description="Ticks per second a port had data to send but no flow-control credits (port_xmit_wait).",
        ),
    )
