"""KV-cache capacity: the cache is full, so concurrency is capped and requests wait or are preempted."""

from __future__ import annotations

from exporter.settings import Thresholds
from exporter.stages.advice import CAP_CHURN, RAISE_KV_SHARE, enable_prefix_caching
from exporter.stages.evidence import engine_gauge, engine_ratio, kv_usage, per_engine
from exporter.stages.panels import PanelDef, Unit, timeseries
from exporter.stages.record import ENGINE, Alert, AlertContext, Fmt, PanelScope, Readings, Row, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import gpu_level, itl_slowdown, ramp
from exporter.stages.signals import History


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    kv = h.maximum("kv_usage", t.level_seconds)
    waiting = h.mean("waiting", t.level_seconds) or 0.0
    preempt = h.rate("preemptions_total", t.level_seconds)
    if kv is None:
        result.evidence.append("no KV-cache usage from this engine: KV capacity not assessed")
        return result
    pressure = ramp(kv, t.kv_usage_warning, t.kv_usage_critical)
    starving = ramp(waiting, 0.0, 1.0)
    preempting = ramp(preempt, 0.0, t.preemptions_per_second)
    level = max(pressure * (0.5 + 0.5 * starving), preempting * ramp(kv, t.kv_usage_warning - 0.2, t.kv_usage_warning))
    # With HBM saturated and tokens slowing, long contexts fill the cache *because* decode is slow
    # (the seed case): KV stays active but decode-bandwidth ranks first.
    _, slowdown = itl_slowdown(h, t)
    dram = gpu_level(h, "dram_active", t, t.dram_active_busy, t.dram_active_saturated).value
    bandwidth_bound = ramp(dram, t.dram_active_busy, t.dram_active_saturated)
    result.score = level * (1.0 - 0.25 * bandwidth_bound * ramp(slowdown, 1.0, t.itl_slowdown_ratio))
    result.evidence.append(
        f"KV-cache usage up to {kv:.2f} (warning {t.kv_usage_warning:g}) with {waiting:.1f} requests waiting"
    )
    pools = h.latest().kv_pools
    if pools:
        # A hybrid model admits only while every pool has room: the fullest one is the limit.
        fullest = max(pools, key=lambda pool: pools[pool])
        others = ", ".join(f"{pool} {usage:.2f}" for pool, usage in sorted(pools.items()) if pool != fullest)
        result.evidence.append(f"fullest KV pool: {fullest} {pools[fullest]:.2f} ({others})")
    if preempt is not None:
        result.evidence.append(f"preemptions {preempt:.2f}/s over {t.level_seconds:g}s")
    return result


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: KV cache {a.value(Fmt.PERCENT)} full (line {a.percent(a.diagnosis.kv_usage_warning)}) "
        f"with {a.figure('waiting')} requests waiting, {a.figure('preemptions')} preemptions/s and "
        f"{a.figure('running')} running (score {a.score()})."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    return (
        kv_usage(s, "KV cache usage", width=5),
        engine_gauge(s, "Preemptions/s", "llm_engine_preemptions_total", "sum", Unit.PER_SECOND, True, width=5),
        timeseries(
            "Running vs waiting",
            per_engine(s, "sum", "llm_engine_requests_running", "{{engine}} running"),
            per_engine(s, "sum", "llm_engine_requests_waiting", "{{engine}} waiting"),
            unit=Unit.COUNT,
            width=5,
            key="kv-running-vs-waiting",
            description="A full KV cache caps running below max_num_seqs while waiting grows.",
        ),
        engine_ratio(
            s,
            "Prefix-cache hit ratio",
            "llm_engine_prefix_cache_hit_ratio",
            width=5,
            description="Shared prompt prefixes served from cache; a low ratio with long shared prompts "
            "means prefix caching is off or ineffective.",
        ),
    )


def _misreadings(readings: Readings, moved: bool) -> list[str]:
    prompt = readings.ratio("mean_prompt_tokens")
    if moved and prompt is not None and prompt > 1.5:
        return [
            f"a static KV configuration: the pool was sized for prompts ×{prompt:.1f} shorter; "
            "gpu_memory_utilization and max_model_len do not follow the request mix"
        ]
    return []


STAGE = register(
    Stage(
        id="kv_cache_capacity",
        order=60,
        roles=("decode",),  # in a disaggregated deployment: a prefill worker's pool holds KV only until it is read
        scope=ENGINE,
        title="KV-cache capacity",
        colour="orange",
        score=score,
        question="is concurrency capped by the KV cache?",
        signature="KV usage ≥ 0.8 with waiting > 0, preemptions",
        reads="KV usage between `kv_usage_warning` and `kv_usage_critical`, waiting, preemption rate",
        guards="KV alone without waiting scores half; with HBM saturated and tokens slowing (the seed case) it "
        "stays active but ranks below decode",
        lines=(
            "kv_usage_warning",
            "kv_usage_critical",
            "preemptions_per_second",
            "dram_active_busy",
            "dram_active_saturated",
            "itl_slowdown_ratio",
        ),
        actions=(
            RAISE_KV_SHARE,
            enable_prefix_caching("so shared prefixes occupy blocks once"),
            CAP_CHURN,
            "add replicas or GPUs (tensor parallelism) for more KV capacity",
        ),
        alerts=(
            Alert(
                "LLMKVCacheSaturated",
                "critical",
                "5m",
                "LLM KV cache is full: concurrency is capped and requests wait or are preempted.",
                _description,
                expr=lambda a: a.past_line("llm_engine_kv_cache_usage_ratio", a.diagnosis.kv_usage_warning),
            ),
        ),
        row=Row("KV cache", _row, score_width=4, short="KV cache"),
        figures=("kv_usage_max", "preemptions_rate", "running"),
        driven_by=("mean_prompt_tokens", "mean_output_tokens", "request_rate", "prefix_cache_hit_ratio"),
        misreadings=_misreadings,
    )
)
