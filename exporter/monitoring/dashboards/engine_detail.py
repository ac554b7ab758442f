"""Engine detail: one engine (variable `engine`) — its load, latency and the GPUs it runs on.

The latency quantiles are the exporter's windowed ones for this engine; the latency heatmaps are
the engines' own histogram buckets (recorded per model across replicas) of this engine's model,
present when Prometheus scrapes the engines too (alerts/README.md, recording rules). The GPU
panels show the GPUs attributed to the engine (label `engine` on GPU series).
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.queries import Scope, stage_mappings
from exporter.stages.panels import (
    BYTES,
    COUNT,
    PER_SECOND,
    RATIO,
    SCORE,
    SECONDS,
    TOKENS_PER_SECOND,
    Line,
    Query,
    heatmap,
    stat,
    state_timeline,
    timeseries,
    value_mappings,
)

UID = "llm-engine-detail"
TITLE = "LLM serving / Engine detail"
VARIABLES = ("datasource", "cluster", "namespace", "node", "model", "engine")
QUANTILES = 'quantile=~"0.5|0.95|0.99"'


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    d = config.diagnosis
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES, single_engine=True)
    kv_lines = (
        Line(d.kv_usage_warning, "orange", "diagnosis.kv_usage_warning"),
        Line(d.kv_usage_critical, "red", "diagnosis.kv_usage_critical"),
    )
    waiting_line = (Line(d.waiting_requests, "red", "diagnosis.waiting_requests"),)
    preemption_line = (Line(d.preemptions_per_second, "red", "diagnosis.preemptions_per_second"),)
    running = f"sum({s('llm_engine_requests_running')})"
    waiting = f"sum({s('llm_engine_requests_waiting')})"
    kv = f"max({s('llm_engine_kv_cache_usage_ratio')})"
    preemptions = f"sum({s.rate('llm_engine_preemptions_total')})"
    prefix = f"max({s('llm_engine_prefix_cache_hit_ratio')})"

    b.top(
        stat("Running", running, unit=COUNT, key="stat-running"),
        stat("Waiting", waiting, unit=COUNT, lines=waiting_line, key="stat-waiting"),
        stat("KV cache usage", kv, unit=RATIO, lines=kv_lines, min=0, max=1, key="stat-kv"),
        stat("Preemptions/s", preemptions, unit=PER_SECOND, lines=preemption_line, key="stat-preemptions"),
        stat("Prefix-cache hit ratio", prefix, unit=RATIO, min=0, max=1, key="stat-prefix"),
        stat(
            "Primary bottleneck",
            s.primary_stage_code(),
            unit=SCORE,
            mappings=value_mappings(stage_mappings()),
            key="stat-primary",
            extra={"options": {"graphMode": "none", "colorMode": "background"}},
        ),
    )
    b.row(
        "Load",
        timeseries(
            "Running and waiting", Query(running, "running"), Query(waiting, "waiting"), unit=COUNT, lines=waiting_line
        ),
        timeseries("KV cache usage", Query(kv, "KV cache"), unit=RATIO, lines=kv_lines, min=0, max=1),
        timeseries("Preemptions", Query(preemptions, "preempted/s"), unit=PER_SECOND, lines=preemption_line),
        timeseries("Prefix-cache hit ratio", Query(prefix, "hit ratio"), unit=RATIO, min=0, max=1, width=12),
        timeseries(
            "Token throughput",
            Query(f"sum({s.rate('llm_engine_prompt_tokens_total')})", "prompt"),
            Query(f"sum({s.rate('llm_engine_generation_tokens_total')})", "generated"),
            unit=TOKENS_PER_SECOND,
            width=12,
        ),
    )

    def quantiles(family: str) -> Query:
        return Query(f"max by (quantile) ({s(family, QUANTILES)})", "p{{quantile}}")

    # The engine's model, to pick its buckets out of the per-model records.
    model_of_engine = f"group by ({s.cluster}, model) ({s('llm_engine_up')})"

    def distribution(key: str) -> Query:
        buckets = s.record(s.records.latency_buckets(key))
        return Query(
            f"sum by (le) (\n  {buckets}\n  * on ({s.cluster}, model) group_left ()\n  {model_of_engine}\n)", "{{le}}"
        )

    b.row(
        "Latency",
        timeseries(
            "Time to first token",
            quantiles("llm_engine_time_to_first_token_seconds"),
            unit=SECONDS,
            width=6,
            lines=(Line(d.ttft_p95_seconds, "red", "diagnosis.ttft_p95_seconds"),),
            key="ttft-quantiles",
        ),
        timeseries(
            "Inter-token latency",
            quantiles("llm_engine_inter_token_latency_seconds"),
            unit=SECONDS,
            width=6,
            lines=(Line(d.itl_p95_seconds, "red", "diagnosis.itl_p95_seconds"),),
            key="itl-quantiles",
        ),
        timeseries(
            "End-to-end latency",
            quantiles("llm_engine_e2e_request_latency_seconds"),
            unit=SECONDS,
            width=6,
            key="e2e-quantiles",
        ),
        timeseries(
            "Queue time", quantiles("llm_engine_queue_time_seconds"), unit=SECONDS, width=6, key="queue-quantiles"
        ),
        heatmap(
            "Time to first token distribution (model)",
            distribution("time_to_first_token"),
            unit=SECONDS,
            width=12,
            key="ttft-heatmap",
            description="Requests per second by TTFT bucket, over all replicas of this engine's model.",
        ),
        heatmap(
            "Inter-token latency distribution (model)",
            distribution("inter_token_latency"),
            unit=SECONDS,
            width=12,
            key="itl-heatmap",
            description="Tokens per second by inter-token-latency bucket, over all replicas of this engine's model.",
        ),
    )
    gpu = "GPU {{gpu}}"
    b.row(
        "GPUs of this engine",
        timeseries(
            "SM active",
            Query(s("llm_gpu_sm_active_ratio"), gpu),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(d.sm_active_ineffective, "orange", "diagnosis.sm_active_ineffective"),),
            key="gpu-sm",
        ),
        timeseries(
            "DRAM active",
            Query(s("llm_gpu_dram_active_ratio"), gpu),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(
                Line(d.dram_active_busy, "orange", "diagnosis.dram_active_busy"),
                Line(d.dram_active_saturated, "red", "diagnosis.dram_active_saturated"),
            ),
            key="gpu-dram",
        ),
        timeseries(
            "Tensor active",
            Query(s("llm_gpu_tensor_active_ratio"), gpu),
            unit=RATIO,
            min=0,
            max=1,
            width=6,
            lines=(Line(d.tensor_active_high, "red", "diagnosis.tensor_active_high"),),
            key="gpu-tensor",
        ),
        timeseries(
            "HBM used",
            Query(s("llm_gpu_memory_used_bytes"), f"{gpu} used"),
            Query(s("llm_gpu_memory_total_bytes"), f"{gpu} total"),
            unit=BYTES,
            width=6,
            key="gpu-hbm",
        ),
    )
    b.row(
        "Diagnosis",
        timeseries(
            "Stage scores",
            Query(f"max by (stage) ({s('llm_bottleneck_score')})", "{{stage}}"),
            unit=SCORE,
            min=0,
            max=1,
            width=12,
            lines=(
                Line(d.exit_score, "orange", "diagnosis.exit_score"),
                Line(d.enter_score, "red", "diagnosis.enter_score"),
            ),
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
