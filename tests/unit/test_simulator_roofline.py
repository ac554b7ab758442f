"""The roofline figures the step model is built on, and one real decode step against them."""

from __future__ import annotations

import pytest

from exporter.simulate import parse_scenario, run_offline
from exporter.simulate.hardware import GPUS, MODELS
from exporter.simulate.roofline import Efficiency, LinkState, Parallelism, StepWork, roofline_decode_seconds, step_cost

SINGLE_REQUESTS = """
name: batch-one
node: {gpu: h100-sxm, gpus: 1}
replicas:
  - model: llama-3.1-8b
    engine: {max_num_seqs: 1}
workload:
  rate_per_second: 0.05
  prompt_tokens: {mean: 200, cv: 0}
  output_tokens: {mean: 300, cv: 0}
phases:
  - name: one-at-a-time
    expected_stage: none
"""


def test_llama_3_1_8b_kv_bytes_per_token_is_exactly_128_kib():
    assert MODELS["llama-3.1-8b"].kv_bytes_per_token == 131_072


def test_kv_bytes_per_token_of_the_other_catalogue_models():
    assert MODELS["llama-3.1-70b"].kv_bytes_per_token == 327_680  # 320 KiB (research note §1.3)
    assert MODELS["codellama-13b"].kv_bytes_per_token == 819_200  # the vLLM paper's 800 KB


@pytest.mark.parametrize(("gpu", "ridge"), [("a100-80gb", 153), ("h100-sxm", 295), ("h200", 206)])
def test_ridge_points_match_the_research_note(gpu, ridge):
    assert GPUS[gpu].ridge_flops_per_byte == pytest.approx(ridge, rel=0.01)


def test_roofline_bound_for_llama_8b_batch_one_on_h100_is_about_4_8_ms():
    assert roofline_decode_seconds(MODELS["llama-3.1-8b"], GPUS["h100-sxm"]) == pytest.approx(4.8e-3, rel=0.01)


def test_batch_one_decode_step_is_within_25_percent_of_the_roofline():
    result = run_offline(parse_scenario(SINGLE_REQUESTS, "test"), duration_seconds=120, drain=True)
    done = [r for r in result.requests if r.finish_reason in ("stop", "length")]
    assert done, "no request finished"
    bound = roofline_decode_seconds(MODELS["llama-3.1-8b"], GPUS["h100-sxm"])
    for request in done:
        step = (request.finished - request.first_token) / (request.generated - 1)
        assert bound <= step <= 1.25 * bound


def test_a_large_prefill_chunk_is_compute_bound_and_decode_is_memory_bound():
    model, gpu = MODELS["llama-3.1-8b"], GPUS["h100-sxm"]
    prefill = step_cost(
        model, gpu, Parallelism(), Efficiency(), StepWork(prefill_tokens=2048, attention_pairs=2048 * 1024), LinkState()
    )
    decode = step_cost(
        model,
        gpu,
        Parallelism(),
        Efficiency(),
        StepWork(decode_seqs=64, kv_read_tokens=64 * 2048, attention_pairs=64 * 2048),
        LinkState(),
    )
    assert prefill.compute_seconds > prefill.memory_seconds
    assert decode.memory_seconds > 3 * decode.compute_seconds


def test_kv_read_makes_decode_step_grow_with_batch_and_context():
    model, gpu = MODELS["llama-3.1-8b"], GPUS["h100-sxm"]

    def decode_step(batch: int, context: int) -> float:
        work = StepWork(decode_seqs=batch, kv_read_tokens=batch * context, attention_pairs=batch * context)
        return step_cost(model, gpu, Parallelism(), Efficiency(), work, LinkState()).step_seconds

    # Research note §1.4: batch 64 at 2k context reads 17 GB of KV and takes about twice batch 1.
    assert decode_step(64, 2048) == pytest.approx(2.07 * decode_step(1, 0), rel=0.1)
    assert decode_step(256, 2048) > 2 * decode_step(64, 2048)


def test_tensor_parallel_across_nodes_puts_the_all_reduce_on_the_nic_and_congestion_slows_it():
    model, gpu = MODELS["llama-3.1-70b"], GPUS["h100-sxm"]
    work = StepWork(decode_seqs=32, kv_read_tokens=32 * 1000, attention_pairs=32 * 1000)
    quiet = step_cost(model, gpu, Parallelism(16, 2), Efficiency(), work, LinkState())
    busy = step_cost(model, gpu, Parallelism(16, 2), Efficiency(), work, LinkState(available_fraction=0.4))
    one_node = step_cost(model, gpu, Parallelism(8, 1), Efficiency(), work, LinkState())
    assert quiet.network_bytes > 0 and one_node.network_bytes == 0 and one_node.nvlink_bytes > 0
    assert busy.step_seconds > 1.5 * quiet.step_seconds
    assert busy.comm_stall_seconds > 0 == quiet.comm_stall_seconds
