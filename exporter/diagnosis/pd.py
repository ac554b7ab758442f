"""Disaggregated pairs across a node's engines: the time to first token taken apart, the link the KV
crosses, and the balance between the prefill and the decode pool.

No single component sees a disaggregated request's time to first token (llm-d's coordinator
exports none on purpose): the prefill worker sees its queue and its compute, the decode worker its
admission, the wait for the KV and its first step, the connector the transfer, a gateway its own
queue. Each part here is the mean over the level window of what one component measures, so the
parts add up (percentiles would not); per decode worker, with the prefill pool of its model on this
node. What no component measures is `None`, shown as not measured, never folded into a neighbour:
vLLM's decode queue time holds the admission, the transfer's queue and its wire time together, and
is split only where the connector measures the wire (NIXL, Mooncake) and the receiver's pending
count gives the time from allocation to arrival (Little's law); SGLang measures the transfer's queue
and wire together at the sender. `unmeasured` is what the parts leave of a measured end-to-end TTFT
(a gateway's), and absent without one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from exporter.catalogue.disagg import TTFT_PARTS
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import Thresholds
from exporter.stages.inputs import EngineKey
from exporter.stages.pd_view import LinkCheck, PdView
from exporter.stages.record import StageResult
from exporter.stages.scoring import ramp
from exporter.stages.signals import History

#: KV bytes the decode side received, against what a link carried: at least this share on one
#: link says the transfers cross it
LINK_SHARE = 0.5


def _rate_mean(histories: Iterable[History], total: str, count: str, seconds: float) -> float | None:
    """Σ increase of `total` / Σ increase of `count` over the window, across engines (request-weighted)."""
    sums = counts = 0.0
    seen = False
    for h in histories:
        s, c = h.rate(total, seconds), h.rate(count, seconds)
        if s is not None and c is not None:
            sums, counts, seen = sums + s, counts + c, True
    return sums / counts if seen and counts > 0 else None


def _summary_mean(metrics: Sequence[Metric], family: str, skip: str = "", **match: str) -> float | None:
    """The mean over the window of a summary family's series whose labels match; `skip`: a gateway type left out."""
    sums = counts = 0.0
    for m in metrics:
        if (
            isinstance(m, QuantileSummary)
            and m.name == family
            and m.window is not None
            and all(m.labels.get(k) == v for k, v in match.items())
            and not (skip and m.labels.get("gateway_type") == skip)
        ):
            sums, counts = sums + m.window.sum, counts + m.window.count
    return sums / counts if counts > 0 else None


@dataclass(frozen=True)
class GatewayFigures:
    """What the node's gateways measure of a disaggregated request: means over their window."""

    queue: float | None = None
    ttft: float | None = None  # end to end (Dynamo's frontend); the llm-d coordinator has none
    transfer_estimate: float | None = None  # Dynamo's router: an upper bound, never the transfer
    prefill_step: float | None = None  # llm-d's coordinator: the prefill leg with its hops


class PairDiagnosis:
    """Works out every disaggregated engine's `PdView` each round and the TTFT parts it exports."""

    def update(
        self,
        histories: Mapping[EngineKey, History],
        live: Iterable[EngineKey],
        metrics: Sequence[Metric],
        t: Thresholds,
    ) -> list[Metric]:
        pools: dict[str, dict[str, list[EngineKey]]] = {}
        for key in live:
            history = histories[key]
            history.pd = None
            role = history.latest().role
            if role in ("prefill", "decode"):
                pools.setdefault(key[2], {}).setdefault(role, []).append(key)
        out: list[Metric] = []
        # Behind llm-d's coordinator the EPP sees each leg as a request of its own: its TTFT is the
        # decode leg's, which starts after the prefill (llm-d-router docs/metrics.coord.md).
        legs = any(getattr(m, "labels", {}).get("gateway_type") == "llm-d-coordinator" for m in metrics)
        gateway = GatewayFigures(
            _summary_mean(metrics, "llm_gateway_queue_time_seconds"),
            _summary_mean(metrics, "llm_gateway_time_to_first_token_seconds", skip="epp" if legs else ""),
            _summary_mean(metrics, "llm_gateway_kv_transfer_estimate_seconds"),
            _summary_mean(metrics, "llm_gateway_step_duration_seconds", step="prefill"),
        )
        for model, roles in sorted(pools.items()):
            prefill = sorted(roles.get("prefill", []))
            decode = sorted(roles.get("decode", []))
            link = _link(metrics, [histories[k] for k in decode], t)
            balance = _balance([histories[k] for k in prefill], [histories[k] for k in decode], t)
            for key in prefill + decode:
                view = PdView(histories[key].latest().role, model, [k[0] for k in prefill], [k[0] for k in decode])
                view.link = link
                view.prefill_saturation, view.decode_saturation, view.balance, view.limiting_pool = balance
                if view.role == "decode":
                    _parts(view, histories[key], [histories[k] for k in prefill], gateway, t)
                    out.extend(_part_metrics(histories[key], view))
                histories[key].pd = view
        return out


def _parts(view: PdView, decode: History, prefill: list[History], gateway: GatewayFigures, t: Thresholds) -> None:
    """One decode worker's TTFT parts (seconds, means over the level window)."""
    level = t.level_seconds
    parts: dict[str, float | None] = dict.fromkeys(TTFT_PARTS)
    parts["gateway_queue"] = gateway.queue
    p_queue = _rate_mean(prefill, "queue_sum_total", "queue_count_total", level)
    p_ttft = _rate_mean(prefill, "ttft_sum_total", "ttft_count_total", level)
    parts["prefill_queue"] = p_queue
    if p_ttft is not None:
        parts["prefill_compute"] = max(0.0, p_ttft - (p_queue or 0.0))
    d_queue = _rate_mean([decode], "queue_sum_total", "queue_count_total", level)
    d_ttft = _rate_mean([decode], "ttft_sum_total", "ttft_count_total", level)
    if d_ttft is not None and d_queue is not None:
        parts["first_decode_step"] = max(0.0, d_ttft - d_queue)
    wire = _rate_mean([decode], "kv_transfer_sum_total", "kv_transfer_count_total", level)
    if wire is not None:
        # The receiver's pending requests over their arrival rate: allocation to arrival (Little's
        # law), never more than the decode side's whole wait that holds it (a gauge sampled every
        # few seconds catches a millisecond transfer now and then, and its mean over a few samples
        # would read tens of milliseconds).
        pending = decode.mean("kv_pending_receiver", level)
        arrivals = decode.rate("kv_transfer_count_total", level)
        in_transfer = pending / arrivals if pending is not None and arrivals else None
        if in_transfer is not None and d_queue is not None:
            in_transfer = min(in_transfer, d_queue)
        parts["transfer"] = wire
        if in_transfer is not None:
            parts["transfer_queue"] = max(0.0, in_transfer - wire)
        if d_queue is not None:
            parts["decode_admission"] = max(0.0, d_queue - max(wire, in_transfer or 0.0))
    else:
        sent = _rate_mean(prefill, "kv_transfer_sum_total", "kv_transfer_count_total", level)
        if sent is not None:  # SGLang: the sender times queue and wire together
            parts["transfer"] = sent
            view.part_notes.append("the transfer includes its queue: the sender measures them together (SGLang)")
            if d_queue is not None:
                parts["decode_admission"] = max(0.0, d_queue - sent)
    if gateway.prefill_step is not None and p_ttft is not None:
        view.part_notes.append(
            f"the coordinator's prefill step {gateway.prefill_step * 1000:.0f} ms against the prefill pool's "
            f"{p_ttft * 1000:.0f} ms: {max(0.0, gateway.prefill_step - p_ttft) * 1000:.0f} ms in the hops"
        )
    if gateway.transfer_estimate is not None:
        view.part_notes.append(
            f"the router estimates the hand-over at {gateway.transfer_estimate * 1000:.0f} ms: an upper bound "
            "(the prefill's completion to the first decode token, decode admission and first step included), "
            "not the transfer"
        )
    if gateway.ttft is not None:
        known = sum(v for v in parts.values() if v is not None)
        parts["unmeasured"] = max(0.0, gateway.ttft - known)
    else:
        view.part_notes.append(
            "no end-to-end TTFT is measured here (no gateway TTFT): the parts add up to a lower bound"
        )
    view.parts = parts


def _part_metrics(decode: History, view: PdView) -> list[Metric]:
    labels = decode.latest().labels
    return [
        Sample("llm_pd_ttft_part_seconds", {**labels, "part": part}, value)
        for part in TTFT_PARTS
        if (value := view.parts.get(part)) is not None
    ]


def _link(metrics: Sequence[Metric], decode: list[History], t: Thresholds) -> LinkCheck:
    """Which link the decode workers' KV bytes cross: the node's RDMA receive rate and its GPUs'
    NVLink receive rate against the bytes the connectors say they moved."""
    level = t.level_seconds
    check = LinkCheck()
    rates = [r for h in decode if (r := h.rate("kv_bytes_total", level)) is not None]
    check.kv_rate = sum(rates) if rates else None
    if decode:
        check.rdma_receive_rate = decode[0].rate("rdma_receive_bytes_total", level)
        cnp = decode[0].rate("rdma_cnp_total", level)
        check.congestion_per_second = cnp
    busiest: tuple[float, str] | None = None
    link_rates: dict[str, float] = {}
    nvlink = 0.0
    for m in metrics:
        if not isinstance(m, Sample):
            continue
        if m.name == "llm_rdma_port_receive_utilization_ratio":
            port = f"{m.labels.get('device', '?')}/{m.labels.get('port', '?')}"
            if busiest is None or m.value > busiest[0]:
                busiest = (m.value, port)
        elif m.name == "llm_rdma_port_link_rate_bytes_per_second":
            link_rates[f"{m.labels.get('device', '?')}/{m.labels.get('port', '?')}"] = m.value
        elif m.name == "llm_gpu_nvlink_receive_bytes_per_second":
            nvlink += m.value
    if busiest is not None:
        check.port_utilization, check.port = busiest
        check.link_rate = link_rates.get(check.port)
    check.nvlink_receive_rate = (
        nvlink if any(m.name == "llm_gpu_nvlink_receive_bytes_per_second" for m in metrics) else None
    )
    kv = check.kv_rate
    if kv:
        if check.nvlink_receive_rate is not None and check.nvlink_receive_rate >= LINK_SHARE * kv:
            check.over = "nvlink"
        elif check.rdma_receive_rate is not None and check.rdma_receive_rate >= LINK_SHARE * kv:
            check.over = "rdma"
    return check


def _balance(
    prefill: list[History], decode: list[History], t: Thresholds
) -> tuple[float | None, float | None, str, str]:
    """How saturated each pool of a model is, and whether one starves the other.

    A prefill pool is saturated when requests queue on it; a decode pool when its KV cache is full
    or hand-overs wait for its slots (its capacity-waiting requests: the ones parked for their KV
    are the transfer's). One pool past 0.6 while the other stays under 0.3 is the imbalance.
    """
    level = t.level_seconds
    line = t.waiting_requests

    def mean(histories: list[History], attr: str) -> float | None:
        values = [v for h in histories if (v := h.mean(attr, level)) is not None]
        return sum(values) / len(values) if values else None

    p_wait = mean(prefill, "waiting")
    prefill_sat = None if p_wait is None else ramp(p_wait, 0.5 * line, line)
    d_wait, d_kv = mean(decode, "waiting"), mean(decode, "kv_usage")
    decode_sat = None
    if d_wait is not None or d_kv is not None:
        decode_sat = max(ramp(d_wait, 0.5 * line, line), ramp(d_kv, t.kv_usage_warning, t.kv_usage_critical))
    text = limiting = ""
    if prefill_sat is not None and decode_sat is not None:
        if prefill_sat >= 0.6 and decode_sat <= 0.3:
            limiting = "prefill"
            text = (
                f"P:D balance: the prefill pool ({len(prefill)} workers, {p_wait:.1f} waiting each) starves the decode "
                f"pool ({len(decode)} workers, saturation {decode_sat:.2f})"
            )
        elif decode_sat >= 0.6 and prefill_sat <= 0.3:
            limiting = "decode"
            text = (
                f"P:D balance: the decode pool ({len(decode)} workers, saturation {decode_sat:.2f}) holds back the "
                f"prefill pool ({len(prefill)} workers, saturation {prefill_sat:.2f})"
            )
    return prefill_sat, decode_sat, text, limiting


def not_judged(title: str, role: str) -> StageResult:
    """A stage that does not apply to this part of a pair: a prefill worker does not decode, a
    decode worker's prompts arrive computed."""
    return StageResult(0.0, [f"{title} is not judged on a {role} worker"])


def pair_evidence(view: PdView | None, evidence: list[str]) -> list[str]:
    """Lines every disaggregated engine's diagnosis carries, whatever stage leads: the pools'
    balance, and on a decode worker its time to first token taken apart (unless the leading stage
    said it already) with the part that dominates named."""
    if view is None:
        return []
    lines = [view.balance] if view.balance else []
    if view.role != "decode" or not view.parts:
        return lines
    parts_line = f"TTFT taken apart: {view.parts_line()}"
    if not any(parts_line in line for line in evidence):
        lines.append(parts_line)
    admission, transfer = view.part("decode_admission"), view.transfer_seconds
    if admission is not None and transfer is not None and admission > 2 * transfer and admission > 0.05:
        lines.append(
            f"the first token waits {admission * 1000:.0f} ms at decode admission for KV slots the pool reserves "
            f"for hand-overs, not on the transfer ({transfer * 1000:.0f} ms): KV capacity, not transfer errors"
        )
    return lines


def balance_actions(view: PdView | None, role: str) -> list[str]:
    """What to do about a pool that starves the other, said on the starving pool's workers."""
    if view is None or not view.balance:
        return []
    if view.limiting_pool != role:
        return []
    other = "decode" if role == "prefill" else "prefill"
    return [
        f"rebalance P:D {len(view.prefill_engines)}:{len(view.decode_engines)} towards {role}: "
        f"add {role} workers or move a {other} worker to {role}"
    ]


def pair_json(view: PdView) -> dict[str, object]:
    """An engine's pair in /diagnosis: its peers, the TTFT parts, the link and the pools' balance."""
    return {
        "prefill": view.prefill_engines,
        "decode": view.decode_engines,
        "ttft_parts_seconds": {k: None if v is None else round(v, 4) for k, v in view.parts.items()},
        "ttft_parts_notes": view.part_notes,
        "link": view.link.describe() if view.link.over else "",
        "prefill_saturation": view.prefill_saturation,
        "decode_saturation": view.decode_saturation,
        "balance": view.balance,
    }
