"""Cluster overview: is the fleet serving well, and where does it hurt?

Throughput and P50/P95/P99 latency per model come from the alerts' recording rules (the latency
quantiles from the engines' histograms summed over replicas, or the exporter's quantiles when
Prometheus does not scrape the engines); queue and KV usage per replica, GPU activity per node,
the load spread and the bottlenecks the exporter diagnoses now come from the exporter's series.
"""

from __future__ import annotations

from typing import Any

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.queries import Scope
from exporter.monitoring.records import RecordNames
from exporter.stages.evidence import drawn, engine_gauge, itl_with_lines, kv_usage, waiting
from exporter.stages.panels import Line, PanelDef, Query, Unit, heatmap, stat, table, timeseries

UID = "llm-cluster-overview"
TITLE = "LLM serving / Cluster overview"
VARIABLES = ("datasource", "cluster", "model")


def active_bottlenecks_table(s: Scope, title: str, **options: Any) -> PanelDef:
    node = s.node
    return table(
        title,
        Query(s.active_bottlenecks()),
        unit="none",
        description="Every engine and stage the exporter's diagnosis holds active now, with its score (0-1). "
        "Empty while nothing is a bottleneck.",
        extra={
            "transformations": [
                {
                    "id": "filterFieldsByName",
                    "options": {"include": {"names": ["stage", "engine", node, "model", "Value"]}},
                },
                {
                    "id": "organize",
                    "options": {
                        "indexByName": {"stage": 0, "engine": 1, node: 2, "model": 3, "Value": 4},
                        "renameByName": {node: "node", "Value": "score"},
                    },
                },
                {"id": "sortBy", "options": {"sort": [{"field": "score", "desc": True}]}},
            ]
        },
        **options,
    )


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    r, d, t = s.records, config.diagnosis, config.thresholds
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)

    b.top(
        stat(
            "Requests/s",
            f"sum({s.record(r.requests_rate)})",
            unit=Unit.REQUESTS_PER_SECOND,
            description="Finished requests per second over the selected models.",
        ),
        stat("Generated tokens/s", f"sum({s.record(r.generation_tokens_rate)})", unit=Unit.TOKENS_PER_SECOND),
        stat("Running", f"sum({s.record(r.running)})", unit=Unit.COUNT),
        stat("Waiting", f"sum({s.record(r.waiting)})", unit=Unit.COUNT),
        stat(
            "KV cache, fullest replica",
            f"max({s.record(r.kv_usage_max)})",
            unit=Unit.RATIO,
            lines=drawn(s, "llm_engine_kv_cache_usage_ratio"),
            min=0,
            max=1,
        ),
        stat(
            "Active bottlenecks",
            f"count({s.active_bottlenecks()}) or vector(0)",
            unit=Unit.COUNT,
            lines=(Line(1, "red"),),
            key="stat-active-bottlenecks",
            description="Engine stages the exporter holds active now.",
        ),
    )
    b.row(
        "Throughput",
        timeseries(
            "Request throughput per model",
            Query(s.record(r.requests_rate), "{{model}}"),
            unit=Unit.REQUESTS_PER_SECOND,
            width=12,
        ),
        timeseries(
            "Token throughput per model",
            Query(s.record(r.prompt_tokens_rate), "{{model}} prompt"),
            Query(s.record(r.generation_tokens_rate), "{{model}} generated"),
            unit=Unit.TOKENS_PER_SECOND,
            width=12,
        ),
    )
    quantiles = 'quantile=~"0.5|0.95|0.99"'
    # Each latency per model: the objective that pages is drawn on TTFT; ITL gets its own lines.
    objective = "Quantiles across each model's replicas; the line is the P99 objective that pages."
    ttft_line = Line(t.ttft_p99_seconds, "red", "thresholds.ttft_p99_seconds")
    latencies = (
        ("Time to first token", "time_to_first_token", (ttft_line,), objective),
        ("End-to-end latency", "e2e_request_latency", (), ""),
        ("Queue time", "queue_time", (), ""),
    )

    def per_model(key: str) -> Query:
        return Query(s.record(r.latency_quantile(key), quantiles), "{{model}} p{{quantile}}")

    panels = [
        timeseries(title, per_model(key), unit=Unit.SECONDS, lines=lines, width=6, description=description)
        for title, key, lines, description in latencies
    ]
    itl = itl_with_lines(
        "Inter-token latency",
        per_model("inter_token_latency"),
        s=s,
        width=6,
        description="Quantiles across each model's replicas.",
    )
    b.row("Latency per model (P50 / P95 / P99)", panels[0], itl, *panels[1:])
    b.row(
        "Queue and KV cache per replica",
        waiting(s, "Waiting per replica"),
        engine_gauge(s, "Running per replica", "llm_engine_requests_running", "sum", Unit.COUNT),
        kv_usage(s, "KV cache usage per replica"),
    )
    per_node = s.by_node()
    b.row(
        "GPU activity per node",
        heatmap(
            "SM active per node",
            Query(f"avg {per_node} ({s('llm_gpu_sm_active_ratio')})", f"{{{{{s.node}}}}}"),
            unit=Unit.RATIO,
            description="Mean SM activity of each node's GPUs, one row per node.",
        ),
        heatmap(
            "DRAM active per node",
            Query(f"avg {per_node} ({s('llm_gpu_dram_active_ratio')})", f"{{{{{s.node}}}}}"),
            unit=Unit.RATIO,
            description="Mean DRAM (HBM) activity of each node's GPUs; near "
            f"{d.dram_active_saturated:g} decode is memory-bandwidth-bound.",
        ),
        timeseries(
            "Load imbalance",
            Query(s.record(r.gpu_busy_cv), "GPU busy across nodes"),
            Query(s.record(r.running_cv), "running across {{model}} replicas"),
            unit=Unit.RATIO,
            lines=(Line(t.load_imbalance_cv, "red", "thresholds.load_imbalance_cv"),),
            description="Coefficient of variation (stddev / mean) of GPU busy across nodes and of running "
            "requests across a model's replicas.",
        ),
    )
    b.row("Bottlenecks", active_bottlenecks_table(s, "Active bottlenecks", width=24, height=8))
    cluster_rows(b, s, config)
    return b


def cluster_rows(b: Board, s: Scope, config: MonitoringConfig) -> None:
    """The nodes compared with each other (exporter/monitoring/cluster.py's records)."""
    c, t = RecordNames(config), config.thresholds
    node = f"{{{{{s.node}}}}}"
    b.row(
        "Cluster: load across nodes",
        timeseries(
            "Generated tokens/s per node",
            Query(s.record(c.node_tokens), node),
            Query(s.record(c.node_tokens_mean), "per-node mean"),
            unit=Unit.TOKENS_PER_SECOND,
            description="Each node's generated tokens/s; a hot node stands above the mean, a cold one below.",
        ),
        timeseries(
            "Load spread across nodes",
            Query(s.record(c.node_tokens_spread), "spread (max - min) / max"),
            unit=Unit.RATIO,
            lines=(Line(t.load_imbalance_spread, "red", "thresholds.load_imbalance_spread"),),
            min=0,
            max=1,
            description="The imbalance LLMLoadImbalance pages on; the seed case saw 35 %.",
        ),
        table(
            "Node load against the per-node mean",
            Query(s.record(c.node_load_ratio)),
            unit=Unit.RATIO,
            description="Above 1 + thresholds.load_imbalance_hot_node_excess a node is hot (named by the alert).",
            extra={"transformations": [{"id": "sortBy", "options": {"sort": [{"field": "Value", "desc": True}]}}]},
        ),
    )
    b.row(
        "Cluster: straggler, scaling, recovery",
        timeseries(
            "Median inter-token latency against the median node",
            Query(s.record(c.node_itl_ratio), node),
            unit="none",
            lines=(Line(t.straggler_itl_ratio, "red", "thresholds.straggler_itl_ratio"),),
            width=6,
            description="A node above the line generates its tokens slower than its peers: the straggler "
            "LLMStragglerNode names, with its clocks and temperature.",
        ),
        timeseries(
            "Scaling efficiency (tokens/s per GPU, cluster over best node)",
            Query(s.record(c.scaling_efficiency), "cluster / best node"),
            Query(s.record(c.node_tokens_per_gpu), f"{node} tokens/s per GPU"),
            unit="none",
            width=6,
            description="1 - the efficiency is the scaling loss: what the cluster's GPUs give up against a GPU "
            "of its best node (imbalance, stragglers, cross-node communication).",
        ),
        timeseries(
            "Recovery after a node returns",
            Query(s.record(c.node_recovery_seconds), f"{node} seconds recovering"),
            unit=Unit.SECONDS,
            width=6,
            description=f"Seconds within {config.windows.node_recovery_lookback} that a node back from an outage "
            f"served under {t.node_recovered_load_ratio:g} of the per-node mean load: its recovery time.",
        ),
        timeseries(
            "Nodes serving, congested links",
            Query(s.record(c.node_serving), f"{node} serving"),
            Query(f"sum {s.by_node()} ({s.record(c.port_congested)})", f"{node} congested links"),
            unit=Unit.COUNT,
            width=6,
            description="1 while every engine of the node answers (0: down or its exporter gone); RDMA ports "
            "busy and stalling (LLMRDMALinkCongested names them).",
        ),
    )
