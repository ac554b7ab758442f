"""Each built-in scenario, run offline for a few simulated minutes, shows the signature of the stage
it expects (each run takes seconds of CPU, hence this tier; loading and errors are
tests/unit/test_simulator_scenarios.py)."""

from __future__ import annotations

import statistics

import pytest

from exporter.simulate import load_scenario, run_offline

pytestmark = pytest.mark.integration

TAIL = 45.0


def run(name: str, seconds: float):
    return run_offline(load_scenario(name), duration_seconds=seconds)


def test_healthy_has_no_queue_no_preemption_and_a_small_kv_footprint():
    w = run("healthy", 90).window(45, 90)
    assert w.waiting < 0.5 and w.preemptions_per_second == 0 and w.kv_usage < 0.3
    assert w.tpot_p50 < 0.012  # near the batch-1 step (about 6 ms on H100)


def test_kv_cache_saturation_fills_the_cache_queues_and_preempts():
    w = run("kv-cache-saturation", 120).window(75, 120)
    assert w.kv_usage >= 0.9 and w.waiting > 1 and w.preemptions_per_second > 0.5
    assert w.running < 0.25 * 256  # capped far below max_num_seqs


def test_queue_overload_grows_the_queue_with_normal_itl_and_low_kv():
    result = run("queue-overload", 150)
    before, after = result.phase_window("within-capacity", tail_seconds=30), result.window(150 - TAIL, 150)
    assert after.waiting_last > after.waiting > 20 and before.waiting < 0.5
    assert after.kv_usage < 0.2 and after.preemptions_per_second == 0
    assert after.ttft_p99 > 10 * before.ttft_p99
    assert after.tpot_p50 < 1.5 * before.tpot_p50


def test_prefill_long_prompts_is_compute_bound_with_prefill_dominated_ttft():
    result = run("prefill-long-prompts", 150)
    before, after = result.phase_window("short-documents", tail_seconds=30), result.window(150 - TAIL, 150)
    assert after.tensor_active > 0.3 and after.sm_active > 0.7 and after.dram_active < 0.5
    assert after.ttft_p99 > 1.0 and after.waiting < 2
    assert after.tpot_p50 > 3 * before.tpot_p50  # decodes stall behind unchunked prefills


def test_decode_bandwidth_saturates_dram_and_slows_every_token():
    result = run("decode-bandwidth", 210)
    before, after = result.phase_window("moderate", tail_seconds=30), result.window(210 - TAIL, 210)
    assert after.dram_active >= 0.85 and after.tensor_active < 0.35 and after.sm_active < 0.65
    assert after.tpot_p50 > 2 * before.tpot_p50
    assert after.kv_usage < 0.9 and after.waiting < 1 and after.preemptions_per_second == 0


def test_cross_node_congestion_fills_the_links_and_signals_congestion():
    result = run("cross-node-congestion", 180)
    before, after = result.phase_window("quiet-fabric", tail_seconds=30), result.window(180 - TAIL, 180)
    assert after.nic_transmit_utilization > 0.8 > 2 * before.nic_transmit_utilization
    assert after.tpot_p50 > 1.5 * before.tpot_p50
    ports = result.node.ports[:8]
    assert all(p.values["np_cnp_sent"] > 0 and p.values["port_xmit_wait"] > 0 for p in ports)


def test_host_overhead_idles_the_gpu_while_the_engine_burns_a_core():
    result = run("host-overhead", 150)
    before, after = result.phase_window("lean-engine", tail_seconds=30), result.window(150 - TAIL, 150)
    assert after.running > 1 and after.gpu_utilization < 0.3 and after.sm_active < 0.2
    assert after.engine_cpu_cores > 0.6 > before.engine_cpu_cores
    assert after.tpot_p50 > 3 * before.tpot_p50


def pd_legs(result, start: float, end: float) -> tuple[float, float]:
    """Medians of (the prefill leg, the decode leg to its first token) of requests that arrived in [start, end)."""
    legs: dict[int, list] = {}
    for request in result.requests:
        legs.setdefault(request.id, []).append(request)
    prefill, decode = [], []
    for pair in legs.values():
        first, *rest = sorted(pair, key=lambda r: r.arrival)
        if start <= first.arrival < end and rest and rest[0].first_token >= 0:
            prefill.append(first.finished - first.arrival)
            decode.append(rest[0].first_token - rest[0].arrival)
    assert len(decode) > 50
    return statistics.median(prefill), statistics.median(decode)


def test_pd_transfer_bound_slows_the_hand_over_not_the_prefill_and_co_locating_fixes_it():
    result = run("pd-transfer-bound", 390)
    same, cross, back = pd_legs(result, 90, 150), pd_legs(result, 270, 330), pd_legs(result, 345, 390)
    assert cross[1] > 3 * same[1] and cross[0] < 1.2 * same[0]  # the decode side waits for its KV
    assert back[1] < 1.5 * same[1]
    received = sum(p.values["port_rcv_data"] for p in result.node.ports)
    assert received > 0  # the KV crossed the decode GPUs' RDMA ports


def test_pd_decode_kv_bound_fills_the_decode_pool_and_holds_the_hand_overs():
    result = run("pd-decode-kv-bound", 240)
    decode = [r for r in result.node.replicas if r.role == "decode"]
    assert min(r.kv.usage for r in decode) > 0.85
    before, after = pd_legs(result, 60, 120), pd_legs(result, 180, 220)
    assert after[1] > 10 * before[1]


def test_admission_limit_caps_the_queue_and_refuses_the_excess():
    result = run("admission-limit", 150)
    after = result.window(150 - TAIL, 150)
    refused = sum(r.stats.refused for r in result.node.replicas)
    served = sum(r.stats.http_responses for r in result.node.replicas)
    assert after.waiting_last <= 16 * 8 and after.waiting > 8  # at the limit (16 waiting per replica)
    assert refused > 0.05 * (refused + served)
    assert after.kv_usage < 0.2 and after.preemptions_per_second == 0


def test_a_sleeping_replica_gets_nothing_and_holds_no_memory_while_the_others_queue():
    result = run("sleeping-replica", 150)
    asleep = result.node.replicas[7]
    assert result.window(150 - TAIL, 150).waiting > 5
    assert asleep.asleep and asleep.stats.http_responses == 0 and not asleep.running
    assert all(r.stats.http_responses > 0 for r in result.node.replicas[:7])
    assert all(g.memory_used_bytes < 0.05 * asleep.gpu.hbm_bytes for g in asleep.gpus)
