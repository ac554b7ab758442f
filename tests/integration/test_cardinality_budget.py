"""The series one node exports, at its documented size and per added engine, GPU and RDMA port.

DESIGN.md's budget: a node of 8 GPUs, 8 engine endpoints and 8 RDMA ports exports at most 1,500
series. The simulated node (vLLM text as the real 0.32.0 capture, dcgm-exporter's labels, a
sysfs tree) is read by the exporter in this process through its ordinary sources
(`ExporterView`), and the series of its /metrics counted after the windows have filled. The
marginal cost of one more engine, GPU or port is bounded too, so the budget at 1,000 nodes
(tests/perf/bench_cluster_scale.py) follows from it.
"""

from __future__ import annotations

import pytest

from exporter.exposition import render_text
from exporter.monitoring.pd_reference import PAIR_SERIES_BUDGET
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import parse_scenario

pytestmark = pytest.mark.integration

NODE_BUDGET = 1500
# Measured (printed by the test): 750 series at the documented size; an engine adds 55 (its
# families, latency summaries with three quantiles, a bottleneck score/active/primary per stage,
# its source's self-observability), a GPU 15, a port 22. The budgets leave about a tenth of room.
PER_ENGINE_BUDGET = 60
PER_GPU_BUDGET = 18
PER_PORT_BUDGET = 27


def node_series(gpus: int, engines: int, ports: int, disaggregation: str = "") -> int:
    """Series of a node; `disaggregation` a format (vllm-nixl, sglang): its engines as one prefill
    and one decode pool of engines / 2 each."""
    replicas = f"""
  - model: llama-3.1-8b
    count: {engines}"""
    if disaggregation:
        replicas = f"""
  - {{model: llama-3.1-8b, role: prefill, count: {engines // 2}}}
  - {{model: llama-3.1-8b, role: decode, count: {engines // 2}}}
disaggregation: {{format: {disaggregation}}}"""
    text = f"""
name: cardinality
seed: 5
node: {{gpu: h100-sxm, gpus: {gpus}, nics: {ports}}}
replicas:{replicas}
workload:
  rate_per_second: {3 * engines}
  prompt_tokens: {{mean: 600, cv: 0.5}}
  output_tokens: {{mean: 200, cv: 0.5}}
"""
    node = SimulatedNode(parse_scenario(text, "cardinality"))
    view = ExporterView(node, interval=5.0)
    try:
        body = b""
        for t in (30.0, 35.0, 40.0):  # every window and rate has a previous collection by the last
            node.advance(t)
            body = render_text(view.collect())
    finally:
        view.close()
    return sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))


def test_a_node_at_its_documented_size_and_each_added_part_stay_within_budget():
    base = node_series(8, 8, 8)
    per_gpu = node_series(9, 8, 8) - base
    per_port = node_series(8, 8, 9) - base
    per_engine = node_series(9, 9, 8) - base - per_gpu
    print(f"series: node (8 GPUs, 8 engines, 8 ports) {base}; per engine {per_engine}, GPU {per_gpu}, port {per_port}")
    assert base <= NODE_BUDGET, f"{base} series at the documented size, budget {NODE_BUDGET}"
    assert 0 < per_engine <= PER_ENGINE_BUDGET, per_engine
    assert 0 < per_gpu <= PER_GPU_BUDGET, per_gpu
    assert 0 < per_port <= PER_PORT_BUDGET, per_port


@pytest.mark.parametrize("disaggregation", ["vllm-nixl", "sglang"])
def test_a_prefill_decode_pair_adds_at_most_its_budget(disaggregation: str) -> None:
    """docs/metrics.md's budget: a pair adds at most PAIR_SERIES_BUDGET series over two unified
    engines of the same model (its role info, the hand-over per side, the decode worker's TTFT parts).
    Measured: +28 (vLLM NIXL), +32 (SGLang: sender and receiver queues besides). Both formats map to
    the same normalized engine families, so two unified vLLM engines are the base of either."""
    unified = node_series(2, 2, 2)
    paired = node_series(2, 2, 2, disaggregation)
    added = paired - unified
    print(f"series: 2 unified engines {unified}; a {disaggregation} prefill/decode pair {paired} (+{added})")
    assert 0 < added <= PAIR_SERIES_BUDGET, added
