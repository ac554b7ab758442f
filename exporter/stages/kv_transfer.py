"""KV transfer: a disaggregated request's first token waits for its KV cache to cross from the
prefill worker to the decode worker.

Scored on the side that times the hand-over (vLLM's connectors: the decode worker's reads; SGLang:
the prefill worker's sends) from the time to first token taken apart across the pair
(exporter/diagnosis/pd.py): the transfer's queue and wire time against the whole, against the
decode worker's step and against its own best. Two misreadings are guarded. A decode worker
waiting for KV is not idle capacity and not a queue for slots: its parked requests are taken out of
its waiting count (pd_inputs.py). A full decode KV pool reserving blocks for in-flight hand-overs
makes the first token wait at admission, before any byte moves: that part is the decode admission,
and the transfer is not blamed for it.
"""

from __future__ import annotations

from exporter.catalogue.disagg import TTFT_PARTS
from exporter.settings import Thresholds
from exporter.stages.evidence import engine_p95
from exporter.stages.panels import PanelDef, Query, Unit, timeseries
from exporter.stages.pd_view import PART_TITLES, PdView
from exporter.stages.record import (
    ENGINE,
    Alert,
    AlertContext,
    Fmt,
    Measure,
    PanelScope,
    Readings,
    Row,
    Stage,
    StageResult,
)
from exporter.stages.registry import register
from exporter.stages.scoring import ramp
from exporter.stages.signals import History

#: the transfer's share of the time to first token over which the stage's score ramps from 0 to 1
SHARE_LOW, SHARE_HIGH = 0.2, 0.4
#: the engine's best transfer p95 over the baseline window, against which "N x slower" is said
SLOWER_THAN_BEST = 3.0
#: the parts of the time to first token the case review compares between its windows
REPORTED_PARTS = tuple(part for part in TTFT_PARTS if part not in ("gateway_queue", "unmeasured"))


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    view = h.pd
    if view is None:
        result.evidence.append("not part of a disaggregated pair: KV transfer not assessed")
        return result
    level = t.level_seconds
    failures = (h.rate("kv_failures_total", level) or 0.0) + (h.rate("kv_expired_total", level) or 0.0)
    lost = ramp(failures, 0.0, 0.2)
    if view.role == "prefill":
        _prefill(h, view, t, result)
    else:
        _decode(h, view, t, result)
    if failures > 0:
        result.evidence.append(f"{failures:.2f} failed or expired hand-overs/s over {level:g}s")
        result.score = max(result.score, lost)
    result.actions = _actions(h, view, t, failures)
    return result


def _decode(h: History, view: PdView, t: Thresholds, result: StageResult) -> None:
    transfer, total = view.transfer_seconds, view.measured_ttft
    result.evidence.append(f"pair: {view.pair} ({view.model})")
    if transfer is None or not total:
        result.evidence.append(
            "no transfer time from this pair's connector: the hand-over is unmeasured "
            "(vLLM's NIXL and Mooncake connectors time it on the decode side, SGLang on the prefill side)"
        )
        return
    share = transfer / total
    step = view.part("first_decode_step")
    steps = transfer / step if step else None
    best = h.best_level("kv_transfer_p95", t.baseline_seconds, t.level_seconds)
    now = h.mean("kv_transfer_p95", t.level_seconds)
    slower = now / best if now is not None and best else None
    result.score = ramp(share, SHARE_LOW, SHARE_HIGH) * max(0.6, ramp(steps, 1.0, 4.0) if steps is not None else 1.0)
    result.evidence.append(f"TTFT taken apart: {view.parts_line()}")
    result.evidence.append(
        f"the transfer (queue and wire) is {share:.0%} of the time to first token"
        + (f", {steps:.1f}x the decode worker's first step" if steps is not None else "")
    )
    if now is not None and slower is not None and slower >= SLOWER_THAN_BEST:
        result.evidence.append(f"transfer p95 {now * 1000:.0f} ms, {slower:.1f}x its best over {t.baseline_seconds:g}s")
    result.evidence.extend(view.part_notes)
    _link_lines(h, view, t, result)
    admission = view.part("decode_admission")
    kv = h.maximum("kv_usage", t.level_seconds)
    if admission is not None and kv is not None and kv >= t.kv_usage_warning and admission > transfer:
        result.evidence.append(
            f"decode KV at {kv:.2f} holds blocks for hand-overs in flight: the first token waits "
            f"{admission * 1000:.0f} ms at admission, which is KV capacity, not the transfer"
        )


def _prefill(h: History, view: PdView, t: Thresholds, result: StageResult) -> None:
    """The sender's side: SGLang times its sends; a vLLM prefill worker only holds the KV."""
    level = t.level_seconds
    sent_sum, sent_count = h.rate("kv_transfer_sum_total", level), h.rate("kv_transfer_count_total", level)
    held = h.mean("kv_pending_sender", level)
    if sent_sum is None or not sent_count:
        result.evidence.append(f"the decode side times this pair's reads ({', '.join(view.decode_engines)})")
        if held:
            result.evidence.append(f"{held:.1f} requests' KV held for the decode side on average")
        return
    sent = sent_sum / sent_count
    ttft = h.rate("ttft_sum_total", level)
    requests = h.rate("ttft_count_total", level)
    own = ttft / requests if ttft is not None and requests else None
    result.score = ramp(sent / own, 0.5, 1.5) if own else 0.0
    result.evidence.append(
        f"sending one request's KV takes {sent * 1000:.0f} ms (queue and wire)"
        + (f" against {own * 1000:.0f} ms to compute it" if own else "")
    )
    if h.latest().kv_connector == "sglang":
        result.evidence.append(
            "SGLang's own kv_transfer_speed_gb_s is not used: it divides every chunk's bytes by the last "
            "chunk's time (SGLang PR #31993); the speed here is bytes over the sender's transfer time"
        )
    _link_lines(h, view, t, result)


def _link_lines(h: History, view: PdView, t: Thresholds, result: StageResult) -> None:
    link = view.link
    level = t.level_seconds
    rate = h.rate("kv_bytes_total", level)
    seconds = h.rate("kv_transfer_sum_total", level)
    if rate and seconds:
        result.evidence.append(
            f"achieved {rate / seconds / 1e9:.1f} GB/s while transferring (bytes over transfer time)"
        )
    if link.kv_rate:
        measured = [f"KV received by the decode workers {link.kv_rate / 1e9:.1f} GB/s"]
        if link.rdma_receive_rate is not None:
            measured.append(f"RDMA ports receive {link.rdma_receive_rate / 1e9:.1f} GB/s")
        if link.nvlink_receive_rate is not None:
            measured.append(f"NVLink receives {link.nvlink_receive_rate / 1e9:.1f} GB/s")
        where = f"the KV crosses {link.describe()}" if link.over else "which link carries it is not measured"
        result.evidence.append(f"link: {'; '.join(measured)}: {where}")
    if link.over == "rdma" and link.congestion_per_second:
        result.evidence.append(f"the fabric signals congestion: {link.congestion_per_second:.0f} CNPs/s handled")


def _actions(h: History, view: PdView, t: Thresholds, failures: float) -> list[str]:
    """What to do, for the state the pair is in."""
    actions = []
    if view.link.over == "rdma":
        actions.append(
            f"place the pair on one node or NVLink domain: its KV crosses {view.link.describe()} "
            "(prefer co-located prefill peers in the router, or schedule the pools together)"
        )
        if view.link.congestion_per_second or (view.link.port_utilization or 0) >= t.rdma_utilization_high:
            actions.append(f"fix the congested link {view.link.port}: move other traffic off the rail, check ECN/PFC")
    kv = h.maximum("kv_usage", t.level_seconds)
    if kv is not None and kv >= t.kv_usage_warning:
        actions.append("give decode more KV headroom (gpu_memory_utilization, fewer max_num_seqs, more decode workers)")
    actions.append("transfer in larger blocks (a larger block_size: fewer descriptors per request)")
    if failures > 0:
        actions.append("try a different connector or transport (UCX/NIXL backend, Mooncake) where transfers fail")
    return actions


def _misreadings(r: Readings, worsened: bool) -> list[str]:
    """Which part of the time to first token grew: the transfer, or another part a reader may
    take for it (the decode admission behind a full KV pool, the prefill)."""
    grown = [(r.ratio(f"ttft_part_{part}"), part) for part in REPORTED_PARTS]
    known = sorted(((ratio, part) for ratio, part in grown if ratio is not None), reverse=True)
    if not known:
        return []
    ratio, part = known[0]
    before, after = r.value(f"ttft_part_{part}", "baseline"), r.value(f"ttft_part_{part}")
    lines = []
    if ratio > 1.0 and before is not None and after is not None:
        lines.append(
            f"the time to first token's {PART_TITLES[part]} part grew most: "
            f"{before * 1000:.0f} -> {after * 1000:.0f} ms (x{ratio:.1f})"
        )
    if worsened and part not in ("transfer", "transfer_queue"):
        lines.append(f"not the transfer: the {PART_TITLES[part]} part grew more than the hand-over did")
    return lines


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: the first token waits on the KV transfer from the prefill workers (score "
        f"{a.value(Fmt.SCORE)}), time to first token p95 {a.figure('ttft_p95')}."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    parts = s("llm_pd_ttft_part_seconds")
    return (
        engine_p95(s, "KV transfer p95", "llm_kv_transfer_seconds", width=6),
        timeseries(
            "Time to first token taken apart (decode workers)",
            Query(f"avg by (part) ({parts})", "{{part}}"),
            unit=Unit.SECONDS,
            width=6,
            stack=True,
            description="Mean parts of a disaggregated request's first token: which one grew is the bottleneck.",
        ),
        timeseries(
            "KV moved vs RDMA received",
            Query(f"sum ({s.rate('llm_kv_transfer_bytes_total')})", "KV bytes/s"),
            Query(f"sum ({s.rate('llm_rdma_port_receive_bytes_total', engine=False)})", "RDMA receive bytes/s"),
            unit=Unit.BYTES_PER_SECOND,
            width=6,
            description="The connectors' bytes against the node's RDMA receive rate: "
            "close together, the KV crosses the fabric.",
        ),
    )


STAGE = register(
    Stage(
        id="kv_transfer",
        order=45,  # between prefill_compute (40) and decode_memory_bandwidth (50)
        scope=ENGINE,
        title="KV transfer",
        colour="light-blue",
        score=score,
        question="does the first token wait for the KV cache to cross from prefill to decode?",
        signature="the transfer's share of TTFT up, transfers slower than their best, pending hand-overs",
        reads="the transfer's queue and wire time as a share of the pair's time to first token (ramp 20 %-40 %), "
        "against the decode worker's first step; failed or expired hand-overs; the link the bytes cross",
        guards="a decode worker's requests parked for KV are neither idle capacity nor queueing; a full decode KV "
        "pool shows as decode admission, not transfer time; SGLang's speed figure is recomputed from bytes and time",
        lines=("baseline_seconds", "kv_usage_warning", "rdma_utilization_high"),
        actions=(
            "place each prefill/decode pair on one node or NVLink domain",
            "transfer in larger blocks (a larger block_size: fewer descriptors per request)",
        ),
        alerts=(
            Alert(
                "LLMKVTransferBound",
                "warning",
                "10m",
                "LLM first tokens wait on the KV-cache transfer between prefill and decode workers.",
                _description,
            ),
        ),
        row=Row("KV transfer", _row, short="KV transfer"),
        figures=("ttft_p99",),
        measures=tuple(
            Measure(
                f"ttft_part_{part}",
                f"TTFT part: {PART_TITLES[part]}",
                "s",
                "llm_pd_ttft_part_seconds",
                aggregate="avg",
                match=f'part="{part}"',
            )
            for part in REPORTED_PARTS
        ),
        driven_by=("mean_prompt_tokens", "request_rate"),
        misreadings=_misreadings,
    )
)
