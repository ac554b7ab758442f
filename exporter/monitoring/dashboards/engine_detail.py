"""Engine detail: one engine (variable `engine`) — its load, latency and the GPUs it runs on.

The latency quantiles are the exporter's windowed ones for this engine; the latency heatmaps are
the engines' own histogram buckets (recorded per model across replicas) of this engine's model,
present when Prometheus scrapes the engines too (alerts/README.md, recording rules). The GPU
panels show the GPUs attributed to the engine (label `engine` on GPU series).
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.health_rows import engine_panels
from exporter.monitoring.dashboards.queries import Scope, stage_mappings
from exporter.stages.evidence import ITL, drawn, gpu_ratio, itl_with_lines, used_and_total
from exporter.stages.panels import (
    PanelDef,
    Query,
    Unit,
    heatmap,
    ratio,
    stat,
    state_timeline,
    timeseries,
    value_mappings,
)

UID = "llm-engine-detail"
TITLE = "LLM serving / Engine detail"
VARIABLES = ("datasource", "cluster", "namespace", "node", "model", "engine")
QUANTILES = 'quantile=~"0.5|0.95|0.99"'
# The latency summaries, each drawn as its quantiles; two also as their distribution (the recorded
# buckets of the engine's model), with what that heatmap counts.
LATENCIES = (
    ("Time to first token", "llm_engine_time_to_first_token_seconds", "ttft"),
    ("Inter-token latency", ITL, "itl"),
    ("End-to-end latency", "llm_engine_e2e_request_latency_seconds", "e2e"),
    ("Queue time", "llm_engine_queue_time_seconds", "queue"),
)
DISTRIBUTIONS = (
    ("Time to first token", "time_to_first_token", "ttft", "Requests per second by TTFT bucket"),
    ("Inter-token latency", "inter_token_latency", "itl", "Tokens per second by inter-token-latency bucket"),
)


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES, single_engine=True)
    kv_family, waiting_family, preemption_family = (
        "llm_engine_kv_cache_usage_ratio",
        "llm_engine_requests_waiting",
        "llm_engine_preemptions_total",
    )
    running = f"sum({s('llm_engine_requests_running')})"
    waiting = f"sum({s(waiting_family)})"
    kv = f"max({s(kv_family)})"
    preemptions = f"sum({s.rate(preemption_family)})"
    prefix = f"max({s('llm_engine_prefix_cache_hit_ratio')})"

    b.top(
        stat("Running", running, unit=Unit.COUNT, key="stat-running"),
        stat("Waiting", waiting, unit=Unit.COUNT, lines=drawn(s, waiting_family), key="stat-waiting"),
        stat("KV cache usage", kv, unit=Unit.RATIO, lines=drawn(s, kv_family), min=0, max=1, key="stat-kv"),
        stat(
            "Preemptions/s",
            preemptions,
            unit=Unit.PER_SECOND,
            lines=drawn(s, preemption_family),
            key="stat-preemptions",
        ),
        stat("Prefix-cache hit ratio", prefix, unit=Unit.RATIO, min=0, max=1, key="stat-prefix"),
        stat(
            "Primary bottleneck",
            s.primary_stage_code(),
            unit=Unit.SCORE,
            mappings=value_mappings(stage_mappings()),
            key="stat-primary",
            extra={"options": {"graphMode": "none", "colorMode": "background"}},
        ),
    )
    b.row(
        "Load",
        timeseries(
            "Running and waiting",
            Query(running, "running"),
            Query(waiting, "waiting"),
            unit=Unit.COUNT,
            lines=drawn(s, waiting_family),
        ),
        ratio("KV cache usage", Query(kv, "KV cache"), lines=drawn(s, kv_family)),
        timeseries(
            "Preemptions", Query(preemptions, "preempted/s"), unit=Unit.PER_SECOND, lines=drawn(s, preemption_family)
        ),
        ratio("Prefix-cache hit ratio", Query(prefix, "hit ratio"), width=12),
        timeseries(
            "Token throughput",
            Query(f"sum({s.rate('llm_engine_prompt_tokens_total')})", "prompt"),
            Query(f"sum({s.rate('llm_engine_generation_tokens_total')})", "generated"),
            unit=Unit.TOKENS_PER_SECOND,
            width=12,
        ),
    )

    # The engine's model, to pick its buckets out of the per-model records.
    model_of_engine = f"group by ({s.cluster}, model) ({s('llm_engine_up')})"

    def distribution(key: str) -> Query:
        buckets = s.record(s.records.latency_buckets(key))
        return Query(
            f"sum by (le) (\n  {buckets}\n  * on ({s.cluster}, model) group_left ()\n  {model_of_engine}\n)", "{{le}}"
        )

    def latency(title: str, family: str, short: str) -> PanelDef:
        query = Query(f"max by (quantile) ({s(family, QUANTILES)})", "p{{quantile}}")
        if family == ITL:
            return itl_with_lines(title, query, s=s, width=6, key=f"{short}-quantiles")
        return timeseries(title, query, unit=Unit.SECONDS, width=6, lines=drawn(s, family), key=f"{short}-quantiles")

    quantiles = [latency(title, family, short) for title, family, short in LATENCIES]
    distributions = [
        heatmap(
            f"{title} distribution (model)",
            distribution(key),
            unit=Unit.SECONDS,
            width=12,
            key=f"{short}-heatmap",
            description=(
                f"{counted}, over all replicas of this engine's model. Empty for a disaggregated model: "
                "its prefill and decode legs are not samples of one latency (the Disaggregated serving "
                "dashboard shows each pool)."
            ),
        )
        for title, key, short, counted in DISTRIBUTIONS
    ]
    b.row("Latency", *quantiles, *distributions)
    gpu = "GPU {{gpu}}"
    b.row(
        "GPUs of this engine",
        gpu_ratio(s, "SM active", "llm_gpu_sm_active_ratio", gpu, key="gpu-sm"),
        gpu_ratio(s, "DRAM active", "llm_gpu_dram_active_ratio", gpu, key="gpu-dram"),
        gpu_ratio(s, "Tensor active", "llm_gpu_tensor_active_ratio", gpu, key="gpu-tensor"),
        used_and_total(s, "HBM used", "llm_gpu_memory", gpu, key="gpu-hbm"),
    )
    b.row("Start-up and host pauses", *engine_panels(s))
    b.row(
        "Diagnosis",
        timeseries(
            "Stage scores",
            Query(f"max by (stage) ({s('llm_bottleneck_score')})", "{{stage}}"),
            unit=Unit.SCORE,
            min=0,
            max=1,
            width=12,
            lines=s.score_lines(),
        ),
        state_timeline(
            "Primary bottleneck",
            Query(s.primary_stage_code(), "{{engine}}"),
            mappings=value_mappings(stage_mappings()),
            width=12,
            key="primary-timeline",
        ),
    )
    return b
