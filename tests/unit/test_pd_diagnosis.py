"""The diagnosis of a disaggregated pair from normalized metrics: the TTFT taken apart, the KV
transfer stage and its guards, the per-role verdicts and the P:D balance.

A prefill engine `p0` and a decode engine `d0` of model `m`, fed round by round (5 s apart) with the
families the engine source exports; each test states what the pair does and what must be read.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from exporter.diagnosis import Diagnoser
from exporter.model import Histogram, Metric, QuantileSummary, Sample

INTERVAL = 5.0
PREFILL = {"engine": "p0", "engine_type": "vllm", "model": "m", "role": "prefill"}
DECODE = {"engine": "d0", "engine_type": "vllm", "model": "m", "role": "decode"}
LINK = 50e9  # a 400 Gb/s port


@dataclass
class Pair:
    """Per-request means of the pair (seconds) and its rates, as the engines measure them."""

    rate: float = 4.0  # requests/s through the pair
    prefill_queue: float = 0.002
    prefill_compute: float = 0.09
    decode_wait: float = 0.02  # arrival at decode to scheduled: admission, transfer queue and wire
    wire: float = 0.006  # the connector's read time
    pending: float = 0.03  # the receiver's requests between allocation and arrival (mean)
    first_step: float = 0.012
    kv: float = 0.2
    decode_waiting: float = 0.0  # capacity-waiting on decode, besides the parked ones
    prefill_waiting: float = 0.0
    tensor: float = 0.3
    rdma_rx_rate: float = 1e8
    rdma_utilization: float = 0.01
    nvlink_rate: float = 2e10
    failures_per_s: float = 0.0


def summary(name: str, labels: dict[str, str], mean: float, count: float, p95: float | None = None) -> Metric:
    p95 = mean * 1.5 if p95 is None else p95
    window = Histogram((p95, float("inf")), (count * 0.95, count), mean * count, count)
    return QuantileSummary(name, labels, ((0.5, mean), (0.95, p95), (0.99, p95)), count, mean * count, window=window)


def round_of(i: int, pair: Pair) -> list[Metric]:
    n = pair.rate * INTERVAL * (i + 1)  # requests so far
    nbytes = 1.6e9 * n
    out: list[Metric] = []
    for labels, waiting in ((PREFILL, pair.prefill_waiting), (DECODE, pair.decode_waiting + pair.pending)):
        out += [
            Sample("llm_engine_up", labels, 1.0),
            Sample("llm_engine_requests_running", labels, 1.0 if labels is PREFILL else 6.0),
            Sample("llm_engine_requests_waiting", labels, waiting),
            Sample("llm_engine_kv_cache_usage_ratio", labels, 0.05 if labels is PREFILL else pair.kv),
            Sample("llm_engine_role_info", {**labels, "source": "configuration"}, 1.0),
        ]
    out += [
        summary("llm_engine_queue_time_seconds", PREFILL, pair.prefill_queue, n),
        summary("llm_engine_time_to_first_token_seconds", PREFILL, pair.prefill_queue + pair.prefill_compute, n),
        Sample("llm_engine_prompt_tokens_total", PREFILL, 2000 * n),
        Sample("llm_engine_generation_tokens_total", PREFILL, n),
        summary("llm_engine_queue_time_seconds", DECODE, pair.decode_wait, n),
        summary("llm_engine_time_to_first_token_seconds", DECODE, pair.decode_wait + pair.first_step, n),
        summary("llm_engine_inter_token_latency_seconds", DECODE, pair.first_step, 100 * n, pair.first_step * 1.2),
        Sample("llm_engine_prompt_tokens_total", DECODE, 2000 * n),
        Sample("llm_engine_generation_tokens_total", DECODE, 100 * n),
        summary("llm_kv_transfer_seconds", {**DECODE, "connector": "nixl"}, pair.wire, n),
        Sample("llm_kv_transfer_bytes_total", {**DECODE, "connector": "nixl"}, nbytes),
        Sample("llm_kv_transfer_pending_requests", {**DECODE, "connector": "nixl", "side": "receiver"}, pair.pending),
        Sample(
            "llm_kv_transfer_failures_total",
            {**DECODE, "connector": "nixl", "kind": "transfer"},
            pair.failures_per_s * INTERVAL * i,
        ),
        Sample("llm_kv_transfer_expired_total", {**PREFILL, "connector": "nixl"}, 0.0),
        Sample(
            "llm_rdma_port_receive_bytes_total", {"device": "mlx5_4", "port": "1"}, pair.rdma_rx_rate * INTERVAL * i
        ),
        Sample("llm_rdma_port_receive_utilization_ratio", {"device": "mlx5_4", "port": "1"}, pair.rdma_utilization),
        Sample("llm_rdma_port_link_rate_bytes_per_second", {"device": "mlx5_4", "port": "1"}, LINK),
        Sample("llm_gpu_nvlink_receive_bytes_per_second", {"gpu": "4", "engine": "d0"}, pair.nvlink_rate),
        Sample("llm_gpu_tensor_active_ratio", {"gpu": "0", "engine": "p0"}, pair.tensor),
    ]
    return out


def diagnose(*phases: tuple[int, Pair]) -> tuple[Diagnoser, list[Metric]]:
    diagnoser, gauges, start = Diagnoser(), [], 0
    for rounds, pair in phases:
        for i in range(start, start + rounds):
            gauges = diagnoser.update(round_of(i, pair), i * INTERVAL)
        start += rounds
    return diagnoser, gauges


def latest(d: Diagnoser, engine: str):  # noqa: ANN201 - EngineDiagnosis
    return next(v for k, v in d.latest.items() if k[0] == engine)


def parts(gauges: list[Metric]) -> dict[str, float]:
    return {m.labels["part"]: m.value for m in gauges if m.name == "llm_pd_ttft_part_seconds"}  # type: ignore[union-attr]


def test_a_healthy_pair_reads_none_and_takes_the_first_token_apart() -> None:
    d, gauges = diagnose((20, Pair()))
    assert latest(d, "d0").primary == latest(d, "p0").primary == "none"
    found = parts(gauges)
    assert found["prefill_compute"] == pytest.approx(0.09, rel=0.02)
    assert found["transfer"] == pytest.approx(0.006, rel=0.02)
    # Little's law: 0.03 pending at 4 arrivals/s is 7.5 ms from allocation to arrival.
    assert found["transfer_queue"] == pytest.approx(0.0075 - 0.006, abs=5e-4)
    assert found["decode_admission"] == pytest.approx(0.02 - 0.0075, abs=5e-4)
    assert found["first_decode_step"] == pytest.approx(0.012, rel=0.02)
    assert "unmeasured" not in found and "gateway_queue" not in found  # no gateway: said, not zero
    document = latest(d, "d0").as_json()
    assert document["role"] == "decode" and document["pair"]["prefill"] == ["p0"]
    assert any("no end-to-end TTFT" in note for note in document["pair"]["ttft_parts_notes"])
    roles = {m.labels.get("role") for m in gauges if m.name == "llm_bottleneck_primary"}  # type: ignore[union-attr]
    assert roles == {"prefill", "decode"}


def test_a_slow_congested_link_is_kv_transfer_on_the_decode_worker_with_the_pair_and_the_link_named() -> None:
    slow = Pair(decode_wait=0.25, wire=0.11, pending=0.9, rdma_rx_rate=4e10, rdma_utilization=0.8, nvlink_rate=0.0)
    d, gauges = diagnose((130, Pair()), (14, slow))
    decode, prefill = latest(d, "d0"), latest(d, "p0")
    assert decode.primary == "kv_transfer" and prefill.primary == "none"
    text = " | ".join(decode.evidence)
    assert "pair: prefill p0 -> decode d0 (m)" in text
    assert "the KV crosses RDMA port mlx5_4/1" in text and "x its best" in text
    assert any("place the pair on one node or NVLink domain" in action for action in decode.actions)
    assert parts(gauges)["transfer"] == pytest.approx(0.11, rel=0.05)


def test_a_full_decode_pool_is_kv_capacity_not_the_transfer() -> None:
    full = Pair(decode_wait=3.0, kv=0.97, decode_waiting=20, pending=0.03)
    d, _ = diagnose((20, Pair()), (14, full))
    decode = latest(d, "d0")
    assert decode.primary == "kv_cache_capacity" and decode.scores["kv_transfer"] < 0.3
    assert any("at decode admission" in line and "not transfer errors" in line for line in decode.evidence)
    assert any("P:D balance: the decode pool" in line for line in decode.evidence)


def test_requests_parked_for_their_kv_are_not_a_queue_for_slots() -> None:
    parked = Pair(pending=40.0, decode_wait=0.05)  # 40 waiting, all of them for their KV
    d, _ = diagnose((20, parked))
    assert latest(d, "d0").scores["queueing"] == 0.0


def test_prefill_compute_is_not_judged_on_a_decode_worker_nor_decode_stages_on_a_prefill_one() -> None:
    d, _ = diagnose((20, Pair(tensor=0.9)))
    decode, prefill = latest(d, "d0"), latest(d, "p0")
    assert decode.scores["prefill_compute"] == 0.0
    assert decode.results["prefill_compute"].evidence == ["prefill compute is not judged on a decode worker"]
    assert prefill.scores["decode_memory_bandwidth"] == prefill.scores["kv_cache_capacity"] == 0.0
    assert prefill.primary == "prefill_compute"


def test_a_starved_decode_pool_names_the_prefill_pool_and_asks_to_rebalance() -> None:
    d, _ = diagnose((20, Pair(prefill_waiting=30, prefill_queue=4.0, tensor=0.8)))
    prefill = latest(d, "p0")
    assert any("P:D balance: the prefill pool (1 workers, 30.0 waiting each) starves" in e for e in prefill.evidence)
    assert any(a.startswith("rebalance P:D 1:1 towards prefill") for a in prefill.actions)


def test_failed_hand_overs_alone_make_the_transfer_the_bottleneck() -> None:
    d, _ = diagnose((20, Pair(failures_per_s=0.5)))
    decode = latest(d, "d0")
    assert decode.primary == "kv_transfer"
    assert any("failed or expired hand-overs/s" in line for line in decode.evidence)
    assert any("different connector or transport" in action for action in decode.actions)


def test_a_monolithic_engine_is_diagnosed_as_before() -> None:
    labels = {"engine": "e0", "engine_type": "vllm", "model": "m"}
    d = Diagnoser()
    for i in range(12):
        snapshot = [Sample("llm_engine_up", labels, 1.0), Sample("llm_engine_requests_waiting", labels, 0.0)]
        gauges = d.update(snapshot, i * INTERVAL)  # judged once its history spans a level window
    (diagnosis,) = d.latest.values()
    assert diagnosis.as_json()["role"] == "unified" and "pair" not in diagnosis.as_json()
    assert all("role" not in m.labels for m in gauges)
    assert not any(m.name == "llm_pd_ttft_part_seconds" for m in gauges)
    assert diagnosis.results["kv_transfer"].evidence == ["not part of a disaggregated pair: KV transfer not assessed"]


def test_a_gateway_s_figures_fill_the_remainder_and_its_estimates_are_only_quoted() -> None:
    """Dynamo's frontend gives the pair's end-to-end TTFT (the unmeasured remainder follows) and its
    router's transfer estimate, an upper bound; llm-d's coordinator its prefill step with the hops."""
    gateway = {"gateway": "g", "gateway_type": "dynamo-frontend"}
    extra = [
        summary("llm_gateway_time_to_first_token_seconds", gateway, 0.2, 1000),
        summary("llm_gateway_kv_transfer_estimate_seconds", gateway, 0.03, 1000),
        summary("llm_gateway_step_duration_seconds", {**gateway, "step": "prefill"}, 0.25, 1000),
        summary("llm_gateway_step_duration_seconds", {**gateway, "step": "decode"}, 1.8, 1000),
    ]
    diagnoser, gauges = Diagnoser(), []
    for i in range(20):
        gauges = diagnoser.update(round_of(i, Pair()) + extra, i * INTERVAL)
    found = parts(gauges)
    measured = sum(value for part, value in found.items() if part != "unmeasured")
    assert found["unmeasured"] == pytest.approx(0.2 - measured, abs=1e-6)
    assert found["transfer"] == pytest.approx(0.006, rel=0.02)  # the connector's, not the router's 30 ms
    notes = latest(diagnoser, "d0").as_json()["pair"]["ttft_parts_notes"]
    assert any("estimates the hand-over at 30 ms: an upper bound" in note for note in notes)
    assert any("prefill step 250 ms against the prefill pool's 92 ms: 158 ms in the hops" in note for note in notes)
    assert not any("no end-to-end TTFT" in note for note in notes)


def test_behind_llm_d_s_coordinator_the_epp_s_ttft_is_a_leg_not_the_request() -> None:
    epp = {"gateway": "epp", "gateway_type": "epp"}
    coordinator = {"gateway": "coord", "gateway_type": "llm-d-coordinator"}
    extra = [
        summary("llm_gateway_time_to_first_token_seconds", epp, 0.03, 1000),  # the decode leg's
        summary("llm_gateway_step_duration_seconds", {**coordinator, "step": "prefill"}, 0.1, 1000),
    ]
    diagnoser, gauges = Diagnoser(), []
    for i in range(20):
        gauges = diagnoser.update(round_of(i, Pair()) + extra, i * INTERVAL)
    assert "unmeasured" not in parts(gauges)  # no end-to-end TTFT: the parts stay a lower bound
    notes = latest(diagnoser, "d0").as_json()["pair"]["ttft_parts_notes"]
    assert any("no end-to-end TTFT" in note for note in notes)


def test_before_its_first_verdict_an_engine_of_a_pair_says_its_role() -> None:
    """/diagnosis lists an engine before its history spans a level window (primary null): its role
    is known from its first scrape and is said there too."""
    d, _ = diagnose((2, Pair()))
    entries = {e["engine"]: e for e in d.report()["engines"]}
    assert entries["d0"]["primary"] is None and entries["d0"]["no_verdict"].startswith("not enough history")
    assert (entries["d0"]["role"], entries["d0"]["role_source"]) == ("decode", "configuration")
    assert entries["p0"]["role"] == "prefill"


def test_a_decode_worker_s_requests_waiting_for_their_kv_are_the_hand_over_s_not_its_queue() -> None:
    """The parked requests leave the decode worker's waiting count (capacity_waiting) and its
    queueing evidence says where they went; its slices' scores carry its role as its stages do."""
    d, gauges = diagnose((20, Pair(pending=4.0)))
    evidence = latest(d, "d0").results["queueing"].evidence
    assert evidence[0].startswith("0.0 requests waiting")
    assert any("4.0 requests wait for their KV from the prefill pool" in line for line in evidence)
    slice_waiting = Sample("llm_engine_slice_requests_waiting", {**DECODE, "slice_by": "priority", "slice": "0"}, 3.0)
    gauges = d.update([*round_of(20, Pair(pending=4.0)), slice_waiting], 20 * INTERVAL)
    (score,) = [m for m in gauges if m.name == "llm_bottleneck_slice_score"]
    assert score.labels["role"] == "decode" and score.labels["slice"] == "0"
