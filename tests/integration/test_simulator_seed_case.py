"""The seed case (docs/design.md#the-worked-case), direction and size, from the built-in `prompt-growth` scenario.

Seed: after the prompt template grew (input 200 -> 800 tokens) P99 rose 800 ms -> 2.5 s, throughput
fell 40 %, running fell 32 -> 18 while waiting grew, SM active 45 %, DRAM active 95 %; prefix
caching, max_model_len 4096 and shortest-job-first brought P99 back to 950 ms. The simulator must
reproduce the directions, the ratios the issue states, and the GPU signature of the incident. Its
absolute latencies are longer than the seed's, and its baseline already shows DRAM near 0.99 with
SM near 0.5: with SM active near 0.45 a decode-bound engine's answers must be about as long as its
prompts, and an engine that decodes 30 requests streams HBM all the time (docs/simulator.md, "The
seed case", gives the arithmetic and the shapes tried). The load is a closed population of editors
(each waits for its answer and thinks before it asks again), so throughput falls with the latency as
the response-time law says, the queue grows to what the population holds and the backlog the
remedies meet is bounded.
"""

from __future__ import annotations

import pytest

from exporter.simulate import WindowSummary, load_scenario, run_offline

pytestmark = pytest.mark.integration  # ten simulated minutes: seconds of CPU

# Each phase is compared over its last minute: queues have settled (baseline, remedied) or have
# been growing for two minutes (long-template).
TAIL_SECONDS = 60.0
_WORKLOAD = load_scenario("prompt-growth").phases[0].workload
POPULATION, THINK_SECONDS = _WORKLOAD.clients, _WORKLOAD.think_seconds
REPLICAS = sum(group.count for group in load_scenario("prompt-growth").replicas)


@pytest.fixture(scope="module")
def phases() -> dict[str, WindowSummary]:
    result = run_offline(load_scenario("prompt-growth"))
    return {p.name: result.phase_window(p.name, tail_seconds=TAIL_SECONDS) for p in result.scenario.phases}


def test_p99_latency_triples_after_the_prompt_change(phases):
    # The seed: 800 ms -> 2.5 s, x3.1; accepted within 30 % of it, and at least x2.6.
    ratio = phases["long-template"].e2e_p99 / phases["baseline"].e2e_p99
    assert max(2.6, 3.1 * 0.7) <= ratio <= 3.1 * 1.3


def test_the_baseline_p99_is_the_answer_length_tail_not_a_queue(phases):
    # No request waits in the baseline, so its P99 is the longest answers' decode time: answers of a
    # narrow spread (cv 0.3) keep it within about twice the mean, which is what leaves room for the
    # queue of the long-template phase to triple it.
    before = phases["baseline"]
    assert before.waiting < 1.0
    assert before.e2e_p99 <= 2.2 * before.e2e_mean


def test_throughput_falls_by_about_forty_percent_after_the_prompt_change(phases):
    # Throughput is completed requests per second (and generated tokens, the same answers).
    before, after = phases["baseline"], phases["long-template"]
    assert 0.5 <= after.requests_per_second / before.requests_per_second <= 0.7
    assert 0.5 <= after.output_tokens_per_second / before.output_tokens_per_second <= 0.7


def test_running_falls_and_waiting_grows_after_the_prompt_change(phases):
    before, after = phases["baseline"], phases["long-template"]
    assert after.running < 0.85 * before.running
    assert 14 <= after.running <= 22  # the seed's 18, within 4
    assert before.waiting < 1.0
    assert after.waiting > 20  # grown from none to a fifth of the population's share of a replica, or more
    assert after.running + after.waiting <= POPULATION / REPLICAS


def test_throughput_follows_the_clients_response_time_law(phases):
    # X = N / (R + Z): the throughput fall is the clients waiting longer, not requests lost.
    for window in phases.values():
        law = POPULATION / (window.e2e_mean + THINK_SECONDS)
        assert window.requests_per_second == pytest.approx(law, rel=0.1)


def test_decode_is_memory_bound_after_the_prompt_change(phases):
    # The seed's SM 45 % with DRAM 95 %: DRAM within its tolerance, SM within 0.07 of 0.45 (few
    # recomputed prompts: each preemption's recompute is tensor work that raises SM active).
    after = phases["long-template"]
    assert after.dram_active >= 0.9
    assert 0.38 <= after.sm_active <= 0.52
    assert after.tensor_active < 0.3  # light compute: the exporter's decode stage needs it


def test_remedies_bring_p99_back_within_one_and_a_half_times_the_original(phases):
    assert phases["remedied"].e2e_p99 <= 1.5 * phases["baseline"].e2e_p99
    assert phases["remedied"].waiting < 1.0


def test_remedies_drain_the_backlog_within_two_minutes() -> None:
    result = run_offline(load_scenario("prompt-growth"))
    remedied = next(p for p in result.scenario.phases if p.name == "remedied")
    baseline = result.phase_window("baseline", tail_seconds=TAIL_SECONDS)
    after_two_minutes = result.window(remedied.start_seconds + 120, remedied.start_seconds + 180)
    assert after_two_minutes.waiting < 1.0
    assert after_two_minutes.ttft_p99 < 2 * baseline.ttft_p99 + 1.0


def test_kv_cache_stays_below_saturation_before_the_change(phases):
    assert phases["baseline"].kv_usage < 0.8
    assert phases["long-template"].kv_usage > 0.9
