"""Queueing: requests wait for a slot while the engine has KV headroom and tokens flow as usual."""

from __future__ import annotations

from exporter.settings import Thresholds
from exporter.stages.evidence import engine_p95, waiting
from exporter.stages.panels import PanelDef
from exporter.stages.readings import average_hides_p99
from exporter.stages.record import ENGINE, Alert, AlertContext, Fmt, PanelScope, Readings, Row, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import itl_slowdown, ramp, slowing
from exporter.stages.signals import History

#: the refused share of arrivals at which refusals start to read as queueing, and fully do
REFUSED_SHARE_LOW, REFUSED_SHARE_HIGH = 0.01, 0.05


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    waiting = h.mean("waiting", t.level_seconds)
    if waiting is None:
        result.evidence.append("no waiting-queue gauge from this engine: queueing not assessed")
        return result
    growth = h.trend("waiting", t.level_seconds * 2)
    queue_p95 = h.level("queue_p95", t.level_seconds)
    kv = h.maximum("kv_usage", t.level_seconds)
    level = ramp(waiting, 0.5, t.waiting_requests)
    if growth is not None and growth > 0:
        level = max(level, ramp(waiting, 0.0, 1.0) * ramp(growth, 0.0, t.waiting_requests))
    # Waiting caused by a full KV cache is the KV stage's; plain queueing has KV headroom and
    # tokens flowing at their usual pace.
    level *= 1.0 - 0.6 * ramp(kv, t.kv_usage_warning, t.kv_usage_critical)
    _, slowdown = itl_slowdown(h, t)
    level *= 1.0 - 0.5 * slowing(slowdown, t)
    # A queue at its admission limit refuses the overflow (HTTP 503) rather than holding it: the
    # waiting gauge stays at the cap however large the excess, and the refusals are the excess.
    # A refused request is an SLO miss outright: one in twenty refused is as plain a queue as a
    # full waiting line (a stray refusal in a hundred is not yet one).
    refused, share = refused_share(h, t)
    level = max(level, ramp(share, REFUSED_SHARE_LOW, REFUSED_SHARE_HIGH))
    result.score = level
    line = f"{waiting:.1f} requests waiting on average (threshold {t.waiting_requests:g})"
    if growth is not None:
        # A trend is signed; rounding a tiny fall would print "-0.0", which reads as a defect.
        line += f", trend {round(growth, 1) + 0.0:+.1f} over {2 * t.level_seconds:g}s"
    result.evidence.append(line)
    if queue_p95 is not None:
        result.evidence.append(f"queue time p95 {queue_p95:.2f}s")
    if refused:
        reasons = ", ".join(sorted(set(h.latest().rejection_reasons))) or "an admission limit"
        result.evidence.append(
            f"{refused:.2f} requests/s refused at admission ({reasons}): {share:.0%} of arrivals never queued"
        )
    deferred = h.mean("requests_waiting_deferred", t.level_seconds)
    parked = h.mean("kv_pending_receiver", t.level_seconds) if h.latest().role == "decode" else None
    if parked:
        # capacity_waiting (stages/inputs.py) took them out of this worker's waiting count
        result.evidence.append(
            f"besides, {parked:.1f} requests wait for their KV from the prefill pool: the hand-over's (kv_transfer)"
        )
    elif deferred:
        result.evidence.append(
            f"{deferred:.1f} of the waiting are deferred, not short of a slot (LoRA budget, KV transfer, blocked)"
        )
    return result


def slice_score(waiting: float, t: Thresholds) -> float:
    """Queueing of one slice (a priority class, a tenant) from its own waiting requests, on the
    engine's line: the KV and slow-token damping are the engine's, shared by every slice."""
    return ramp(waiting, 0.5, t.waiting_requests)


def refused_share(h: History, t: Thresholds) -> tuple[float | None, float | None]:
    """(refusals per second, refused share of arrivals) over the level window; (None, None) for an
    engine without an admission counter."""
    refused = h.rate("admission_rejections_total", t.level_seconds)
    finished = h.rate("requests_finished_total", t.level_seconds)
    if refused is None or finished is None or refused + finished <= 0:
        return refused, None
    return refused, refused / (refused + finished)


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: {a.value(Fmt.COUNT)} requests waiting (line {a.diagnosis.waiting_requests:g}), "
        f"queue time p95 {a.figure('queue_p95')}, time to first token p95 {a.figure('ttft_p95')}, "
        f"running {a.figure('running')}, KV cache {a.figure('kv')} (score {a.score()})."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    return (
        waiting(s, "Waiting requests", width=6),
        engine_p95(s, "Queue time p95", "llm_engine_queue_time_seconds", width=6),
        engine_p95(
            s,
            "Time to first token p95",
            "llm_engine_time_to_first_token_seconds",
            width=6,
            description="Queueing: TTFT rises with queue time while inter-token latency stays normal.",
        ),
    )


def _misreadings(readings: Readings, moved: bool) -> list[str]:
    return average_hides_p99(readings)


STAGE = register(
    Stage(
        id="queueing",
        order=30,
        scope=ENGINE,
        title="queueing",
        colour="yellow",
        score=score,
        question="do requests wait for a slot?",
        signature="`llm_engine_requests_waiting`, queue-time p95",
        reads="waiting (level and growth), queue-time p95",
        guards="damped when KV usage is past `kv_usage_warning` (then it is KV capacity) and when inter-token "
        "latency slowed (queueing's signature is tokens flowing at their usual pace)",
        lines=("waiting_requests", "kv_usage_warning", "kv_usage_critical", "itl_slowdown_ratio"),
        actions=(
            "add replicas or raise max_num_seqs while KV-cache headroom and latency allow",
            "route new requests to less loaded replicas (queue-aware load balancing)",
            "shed or defer low-priority traffic at the gateway",
        ),
        alerts=(
            Alert(
                "LLMSchedulingQueueBacklog",
                "warning",
                "10m",
                "LLM requests queue: every engine slot is busy.",
                _description,
                expr=lambda a: a.past_line("llm_engine_requests_waiting", a.diagnosis.waiting_requests),
            ),
        ),
        row=Row("Queueing", _row),
        figures=("waiting", "queue_p99", "request_rate"),
        driven_by=("mean_prompt_tokens", "mean_output_tokens", "request_rate"),
        misreadings=_misreadings,
    )
)
