"""Cross-node communication: steps wait on RDMA (tensor or pipeline parallelism across nodes)."""

from __future__ import annotations

from exporter.health.finding import GPU_LINK, NETWORK, lines_for
from exporter.settings import Thresholds
from exporter.stages.evidence import rdma_node_evidence
from exporter.stages.record import ENGINE, Alert, AlertContext, Fmt, Row, Stage, StageResult
from exporter.stages.registry import register
from exporter.stages.scoring import itl_slowdown, ramp, requests_in_engine
from exporter.stages.signals import History


def score(h: History, t: Thresholds) -> StageResult:
    result = StageResult()
    util = h.mean("rdma_utilization", t.level_seconds)
    cnp = h.rate("rdma_cnp_total", t.level_seconds)
    retrans = h.rate("rdma_retransmissions_total", t.level_seconds)
    # Links below their capability or a drifted fabric explain this stage when it fires, and say
    # where to look before it does: quoted whatever the score (exporter/health/).
    found = lines_for(h.findings, (NETWORK, GPU_LINK))
    if util is None and cnp is None and retrans is None:
        result.evidence.append("no RDMA ports on this node: cross-node communication not assessed")
        result.evidence.extend(found)
        return result
    congestion = max(ramp(cnp, 0.0, t.cnp_per_second), ramp(retrans, 0.0, t.retransmissions_per_second))
    saturation = ramp(util, t.rdma_utilization_high - 0.2, t.rdma_utilization_high + 0.1)
    _, slowdown = itl_slowdown(h, t)
    # Congestion alone on a node whose engine is not slowed is the network's problem, not this
    # engine's bottleneck: weight by the step slowdown where it is known.
    symptom = 1.0 if slowdown is None else max(0.5, ramp(slowdown, 1.0, t.itl_slowdown_ratio))
    result.score = max(saturation, congestion) * symptom * ramp(requests_in_engine(h, t), 0.0, 1.0)
    if h.pd is not None and h.pd.link.over == "rdma":
        # The ports carry a disaggregated pair's KV hand-over: the KV transfer stage weighs that.
        result.score *= 0.5
        result.evidence.append("the node's RDMA ports carry the KV hand-over of its prefill/decode pair")
    parts = []
    if util is not None:
        parts.append(f"RDMA link utilization {util:.2f}")
    if cnp is not None:
        parts.append(f"CNP {cnp:.0f}/s")
    if retrans is not None:
        parts.append(f"retransmissions {retrans:.1f}/s")
    result.evidence.append(", ".join(parts))
    result.evidence.extend(found)
    return result


def _description(a: AlertContext) -> str:
    return (
        f"{a.engine}: cross-node communication limits the step (score {a.value(Fmt.SCORE)}): "
        f"RDMA transmit utilization up to {a.figure('rdma_util')}, {a.figure('cnp')} CNPs handled/s, "
        f"{a.figure('retrans')} retransmissions/s on the node, inter-token latency p95 {a.figure('itl_p95')}."
    )


STAGE = register(
    Stage(
        id="cross_node_communication",
        order=70,
        scope=ENGINE,
        title="cross-node communication",
        colour="blue",
        score=score,
        question="do steps wait on RDMA?",
        signature="link utilization, CNP/ECN and retransmission rates",
        reads="RDMA utilization, CNP and retransmission rates",
        guards="weighted by the engine's own ITL slowdown, and needs running requests; halved where the ports carry "
        "a prefill/decode pair's KV hand-over (the KV transfer stage's)",
        lines=("rdma_utilization_high", "cnp_per_second", "retransmissions_per_second", "itl_slowdown_ratio"),
        actions=(
            "check RDMA congestion control (ECN/PFC, DCQCN) and the fabric for hot links",
            "place tensor-parallel groups inside one node (NVLink) and use pipeline parallelism across nodes",
            "verify the RDMA NIC and GPU share a PCIe switch / NUMA node (GPUDirect RDMA)",
        ),
        alerts=(
            Alert(
                "LLMCrossNodeCommunicationBottleneck",
                "warning",
                "10m",
                "LLM steps wait on cross-node communication over RDMA.",
                _description,
            ),
        ),
        row=Row("Network", lambda s: rdma_node_evidence(s, width=5), score_width=4),
        figures=("rdma_utilization", "rdma_congestion"),
    )
)
