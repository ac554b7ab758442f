"""The series one node exports, at its documented size and per added engine, GPU and RDMA port.

The budget (docs/design.md#budgets): a node of 8 GPUs, 8 engine endpoints and 8 RDMA ports exports at most 1,500
series. The simulated node (vLLM text as the real 0.32.0 capture, dcgm-exporter's labels, a
sysfs tree) is read by the exporter in this process through its ordinary sources
(`ExporterView`), and the series of its /metrics counted after the windows have filled. The
marginal cost of one more engine, GPU or port is bounded too, so the budget at 1,000 nodes
(tests/perf/bench_cluster_scale.py) follows from it.
"""

from __future__ import annotations

import pytest

from exporter.app import Exporter, Pipeline
from exporter.catalogue.disagg import PD_FAMILIES
from exporter.exposition import render_text
from exporter.monitoring.pd_reference import PAIR_SERIES_BUDGET
from exporter.settings import Config, EngineTarget, GpuSettings, ScrapeLimits, SloTarget
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import parse_scenario
from exporter.sources.engine import EngineSource
from tests.support import RouteServer, respond_with, sglang_sliced_page

pytestmark = pytest.mark.integration

NODE_BUDGET = 1500
# Measured (printed by the test): 910 series at the documented size; an engine adds 75 (its
# families, latency and prefill/decode summaries with three quantiles, the 2026 families: refusals,
# cached prompt tokens and reuse, sleep state, MFU counters, tokens per step; a bottleneck
# score/active/primary per stage, its source's self-observability), a GPU 15, a port 22. The
# budgets leave about a fifth of room. A GPU read from dcgm-exporter with the shipped counters file
# adds its PCIe link's generation and width, current and maximum: 20 measured.
PER_ENGINE_BUDGET = 86
# Slices (docs/metrics.md): 10 tenants, 10 adapters and 3 priority classes kept, 5 tenants and 5
# adapters folded into `other`, one SLO of two dimensions: measured 112 more series for the engine
# (25 slices x 2 dimensions x attainment and goodput, the queue of each priority class and its
# queueing score, one fold count per dimension). A fifth of room.
SLICED_ENGINE_BUDGET = 135
PER_GPU_BUDGET = 24
# A port: 22 of the RDMA source, 14 of the links source now that the simulated tree has what a
# real one has (its NIC's PCIe generation and width by bound 6, physical state 1, link error
# counters 5, ECN at the RoCE priority 2): 36 measured.
PER_PORT_BUDGET = 43


def node_series(gpus: int, engines: int, ports: int, disaggregation: str = "") -> int:
    """Series of a node; `disaggregation` a format (vllm-nixl, sglang): its engines as one prefill
    and one decode pool of engines / 2 each."""
    return len(node_lines(gpus, engines, ports, disaggregation))


def node_lines(gpus: int, engines: int, ports: int, disaggregation: str = "") -> list[str]:
    """The node's exposition, one line per series, once its engines have verdicts."""
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
        # every window and rate has a previous collection by the last, and every engine's history
        # spans the diagnosis's level window (30 s), so its bottleneck series are there
        for t in range(30, 75, 5):
            node.advance(float(t))
            body = render_text(view.collect())
    finally:
        view.close()
    return [line for line in body.decode().splitlines() if line and not line.startswith("#")]


def family_of(line: str) -> str:
    name = line.split("{")[0].split(" ")[0]
    for suffix in ("_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in _PD_NAMES:
            return name[: -len(suffix)]
    return name


_PD_NAMES = frozenset(spec.name for spec in PD_FAMILIES)


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
    """docs/metrics.md's budget: a pair adds at most PAIR_SERIES_BUDGET series (its role info, the
    hand-over per side, the decode worker's TTFT parts: the disaggregated families). In vLLM's
    format they are all it adds over two unified vLLM engines of the same model; SGLang's format
    has fewer engine families than vLLM's (no prefill/decode time histograms, MFU or speculative
    counters), so a pair in it is measured by its disaggregated families alone."""
    unified = node_lines(2, 2, 2)
    paired = node_lines(2, 2, 2, disaggregation)
    added = sum(1 for line in paired if family_of(line) in _PD_NAMES)
    print(f"series: 2 unified engines {len(unified)}; a {disaggregation} pair {len(paired)}, {added} disaggregated")
    assert 0 < added <= PAIR_SERIES_BUDGET, added
    assert not any(family_of(line) in _PD_NAMES for line in unified)
    if disaggregation == "vllm-nixl":  # nothing else grows (a prefill worker's ITL may be absent)
        assert 0 < len(paired) - len(unified) <= added


def test_slices_of_ten_tenants_ten_adapters_three_priorities_stay_within_budget() -> None:
    limits = ScrapeLimits(
        slice_labels=(("tenant", ("tenant",)), ("adapter", ("adapter",)), ("priority", ("priority",)))
    )
    counts = {}
    for sliced in (False, True):
        page = RouteServer()
        target = EngineTarget(
            url=page.url("/metrics"),
            name="s",
            type="sglang",
            limits=limits if sliced else ScrapeLimits(max_slices_per_dimension=0),
        )
        config = Config(gpu=GpuSettings("none"), slos=(SloTarget("chat", 0.9, ttft_seconds=1.0, e2e_seconds=5.0),))
        clock = [0.0]
        exporter = Exporter(config, clock=lambda c=clock: c[0], pipeline=Pipeline([EngineSource(target, 60.0)], []))
        try:
            for step, requests in enumerate((4, 8)):
                page.routes["/metrics"] = respond_with(sglang_sliced_page(requests))
                clock[0] = 10.0 * step
                snapshot = exporter.collect_once()
            text = render_text(snapshot).decode()
        finally:
            exporter.stop()
            page.close()
        counts[sliced] = sum(
            1 for line in text.splitlines() if line and not line.startswith("#") and 'engine="s"' in line
        )
        if sliced:
            assert 'llm_engine_slices_folded{engine="s",engine_type="sglang",model="m",slice_by="tenant"} 5.0' in text
            assert text.count("llm_slo_slice_attainment_ratio{") == 2 * (11 + 11 + 3)
    added = counts[True] - counts[False]
    print(f"series of one engine: {counts[False]} unsliced, {counts[True]} with slices (+{added})")
    assert 0 < added <= SLICED_ENGINE_BUDGET, added
