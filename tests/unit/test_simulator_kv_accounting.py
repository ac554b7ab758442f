"""KV accounting: the pool is never overcommitted, preempted requests always finish, and the
engine's token counters are exactly the sums over the requests it served."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.simulate import parse_scenario, run_offline
from exporter.simulate.kvcache import KvCache

# A small KV pool under long prompts: V1 without a watermark preempts constantly.
PRESSURE = """
name: kv-pressure
node: {gpu: a100-80gb, gpus: 2}
replicas:
  - model: codellama-13b
    count: 2
    engine:
      gpu_memory_utilization: 0.5
      max_num_batched_tokens: 1024
      enable_prefix_caching: true
      scheduling: SCHEDULING
      max_model_len: 8192
workload:
  rate_per_second: 2.5
  prompt_tokens: {mean: 2000, cv: 0.8, min: 64, max: 12000}
  output_tokens: {mean: 400, cv: 0.6, min: 8, max: 2048}
  shared_prefix_ratio: 0.3
phases:
  - name: pressure
    expected_stage: kv_cache_capacity
"""


@pytest.fixture(scope="module", params=["fcfs", "sjf"])
def drained(request):
    scenario = parse_scenario(PRESSURE.replace("SCHEDULING", request.param), "test")
    return run_offline(scenario, duration_seconds=120, drain=True)


def test_blocks_in_use_never_exceed_the_pool(drained):
    for replica in drained.node.replicas:
        assert 0 < replica.kv.peak_occupied_blocks <= replica.kv.total_blocks


def test_the_scenario_really_preempts(drained):
    assert sum(r.stats.preemptions for r in drained.node.replicas) > 10


def test_every_preempted_request_is_eventually_completed_or_rejected(drained):
    assert drained.node.open_requests() == []
    preempted = [r for r in drained.requests if r.preemptions]
    assert preempted
    assert all(r.finish_reason in ("stop", "length", "rejected", "error") for r in preempted)


def test_prompts_beyond_max_model_len_are_rejected_not_served(drained):
    rejected = [r for r in drained.requests if r.finish_reason == "rejected"]
    assert rejected and all(r.prompt_tokens >= 8192 and r.generated == 0 for r in rejected)
    assert sum(r.stats.rejected for r in drained.node.replicas) == len(rejected)


def test_token_counters_equal_the_sums_over_finished_requests(drained):
    for replica in drained.node.replicas:
        served = [r for r in replica.finished if r.finish_reason in ("stop", "length")]
        assert replica.stats.prompt_tokens == sum(r.prompt_tokens for r in served)
        assert replica.stats.generation_tokens == sum(r.generated for r in served)
        assert replica.stats.prompt_tokens_cached + replica.stats.prompt_tokens_computed == replica.stats.prompt_tokens
        finished = replica.stats.finished
        assert finished["stop"] + finished["length"] == len(served)
        assert replica.stats.histograms["e2e_request_latency_seconds"].count == len(served)


def test_a_drained_engine_holds_no_private_blocks(drained):
    for replica in drained.node.replicas:
        assert replica.kv.private_blocks == 0
        assert replica.kv.referenced_blocks == 0
        assert replica.kv.usage == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["alloc", "free", "acquire", "release", "publish"]), st.integers(0, 3), st.integers(1, 40)
        ),
        max_size=80,
    )
)
def test_kv_cache_bookkeeping_stays_consistent(operations):
    kv = KvCache(total_blocks=100, block_size=16)
    private = 0
    refs: dict[int, int] = {}
    for op, key, blocks in operations:
        prefix = (key, 16 * 10)
        if op == "alloc" and blocks <= kv.free_blocks:
            kv.allocate(blocks)
            private += blocks
        elif op == "free" and private >= blocks:
            kv.free(blocks)
            private -= blocks
        elif op == "acquire" and kv.cached_blocks(prefix) and kv.idle_blocks(prefix) <= kv.free_blocks:
            kv.acquire(prefix)
            refs[key] = refs.get(key, 0) + 1
        elif op == "release" and refs.get(key):
            kv.release(prefix)
            refs[key] -= 1
        elif op == "publish" and private >= 10 and kv.publish(prefix, 10):
            private -= 10
            refs[key] = refs.get(key, 0) + 1
        occupied = kv.private_blocks + kv.referenced_blocks + kv.idle_cached_blocks
        assert kv.private_blocks == private
        assert 0 <= kv.used_blocks <= kv.total_blocks
        assert occupied <= kv.total_blocks
        assert 0.0 <= kv.usage <= 1.0
