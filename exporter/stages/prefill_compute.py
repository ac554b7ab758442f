"""Prefill compute: long prompts keep the tensor pipes busy and the first token waits on them."""

from __future__ import annotations

from exporter.settings import Thresholds
from exporter.stages.advice import enable_prefix_caching
from exporter.stages.engine_estimates import engine_estimate
from exporter.stages.evidence import engine_gauge, engine_ratio
from exporter.stages.panels import PanelDef, Query, Unit, timeseries
from exporter.stages.record import ENGINE, Alert, AlertContext, Fmt, PanelScope, Row, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import clamp, gpu_level, no_gpu_line, ramp
from exporter.stages.signals import History


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    tensor_level = gpu_level(h, "tensor_active", t, t.tensor_active_high - 0.2, t.tensor_active_high)
    tensor = tensor_level.value
    estimate = engine_estimate(h, t, "compute")
    stands_in = tensor is None and tensor_level.bounds is None and estimate is not None and estimate.share is not None
    if stands_in and estimate is not None:
        # No tensor-pipe counter for this engine's GPUs: the engine's own FLOPs stand in for it.
        tensor = estimate.share
    elif estimate is not None:
        result.evidence.append(estimate.line)
    ttft = h.level("ttft_p95", t.level_seconds)
    queue = h.level("queue_p95", t.level_seconds) or 0.0
    prompt_rate = h.rate("prompt_tokens_total", t.level_seconds)
    gen_rate = h.rate("generation_tokens_total", t.level_seconds)
    share = None
    if prompt_rate is not None and gen_rate is not None and prompt_rate + gen_rate > 0:
        share = prompt_rate / (prompt_rate + gen_rate)
    prefill_heavy = ramp(share, 0.6, 0.9)
    own_ttft = None if ttft is None else max(0.0, ttft - queue)
    # Prefill recomputed after preemptions is the KV stage's doing, not long prompts.
    kv_churn = ramp(h.rate("preemptions_total", t.level_seconds), 0.0, t.preemptions_per_second)
    if tensor is not None:
        result.score = (
            ramp(tensor, t.tensor_active_high - 0.2, t.tensor_active_high) * prefill_heavy * (1.0 - 0.5 * kv_churn)
        )
        result.evidence.append(
            f"{estimate.line}, in place of tensor activity (none from this engine's GPU source)"
            if stands_in and estimate is not None
            else f"tensor active {tensor:.2f} {tensor_level.where}"
        )
    else:
        result.evidence.append(
            no_gpu_line(h, t, "no GPU tensor activity for this engine", tensor_level.withheld)
            + ": scored from TTFT beyond queueing"
        )
        result.score = ramp(own_ttft, t.ttft_p95_seconds * 0.5, t.ttft_p95_seconds) * prefill_heavy
        if tensor_level.bounds is not None:
            band = (t.tensor_active_high - 0.2, t.tensor_active_high)
            lowest, highest = (ramp(v, *band) * prefill_heavy * (1.0 - 0.5 * kv_churn) for v in tensor_level.bounds)
            result.score = clamp(result.score, lowest, highest, result)
    if share is not None:
        result.evidence.append(f"prompt tokens are {share:.0%} of tokens processed ({prompt_rate:.0f}/s)")
    if own_ttft is not None:
        result.evidence.append(f"TTFT p95 {ttft:.2f}s of which queue p95 {queue:.2f}s")
    prefill = h.mean("prefill_p95", t.level_seconds)
    if prefill is not None:
        result.evidence.append(f"prefill time p95 {prefill:.2f}s (the engine's own per-request prefill clock)")
    return result


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: prefill is compute-bound (score {a.value(Fmt.SCORE)}): tensor active {a.figure('tensor')}, "
        f"time to first token p95 {a.figure('ttft_p95')}, queue time p95 {a.figure('queue_p95')}, "
        f"{a.figure('prompt_rate')} prompt tokens/s."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    ttft, queue = s.engine_p95("llm_engine_time_to_first_token_seconds"), s.engine_p95("llm_engine_queue_time_seconds")
    return (
        engine_ratio(s, "Tensor active of the engine's GPUs", "llm_gpu_tensor_active_ratio", width=6),
        engine_gauge(
            s, "Prompt tokens/s", "llm_engine_prompt_tokens_total", "sum", Unit.TOKENS_PER_SECOND, True, width=6
        ),
        timeseries(
            "Prefill time p95 (TTFT minus queue time)",
            Query(f"{ttft}\n-\n{queue}", "{{engine}}"),
            unit=Unit.SECONDS,
            width=6,
            description="Prefill, not queueing: this is most of the time to first token.",
        ),
    )


STAGE = register(
    Stage(
        id="prefill_compute",
        order=40,
        roles=("prefill",),  # in a disaggregated deployment: a decode worker's prompts arrive computed
        scope=ENGINE,
        title="prefill compute",
        colour="purple",
        score=score,
        question="is prompt processing compute-bound?",
        signature="tensor active, TTFT minus queue time, prompt tokens/s",
        reads="tensor active (ramp from `tensor_active_high` − 0.2), share of prompt tokens in tokens processed; "
        "without GPU data TTFT p95 minus queue p95",
        guards="needs prompt-heavy traffic; damped by preemption churn (recompute is the KV stage's)",
        lines=("tensor_active_high", "ttft_p95_seconds", "preemptions_per_second"),
        actions=(
            "enable chunked prefill so long prompts do not stall decode steps",
            enable_prefix_caching("to skip recomputing shared prompt prefixes"),
            "split prefill and decode onto separate GPUs (disaggregated serving) for long-document traffic",
        ),
        alerts=(
            Alert(
                "LLMPrefillComputeBound",
                "warning",
                "10m",
                "LLM prompt processing (prefill) is compute-bound.",
                _description,
            ),
        ),
        row=Row("Prefill", _row),
        figures=("ttft_p99", "prompt_tokens_rate", "tensor_active"),
        driven_by=("mean_prompt_tokens", "request_rate", "prefix_cache_hit_ratio"),
    )
)
