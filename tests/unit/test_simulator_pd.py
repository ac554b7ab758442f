"""The simulator's disaggregated pools: scenario rules, the hand-over, and the engines' text.

A few simulated seconds of the built-in P/D scenarios each: every request is prefilled by the
prefill pool and decoded by the decode pool, the KV crosses NVLink or RDMA and lands in the
counters of the link it crosses, the prefill side frees what the decode side has read, and the text
the engines serve parses as Prometheus text with each engine's own families.
"""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.simulate import load_scenario, parse_scenario
from exporter.simulate.node import SimulatedNode
from exporter.simulate.pd_engine import DecodeReplica, PrefillReplica
from exporter.simulate.pd_sglang_text import render_sglang
from exporter.simulate.vllm_text import render_vllm
from exporter.validation import ConfigError

MINIMAL = """
name: pd
node: {{gpu: h100-sxm, gpus: 2}}
{disaggregation}
replicas:
  - {{model: llama-3.1-8b, count: 1{prefill_role}}}
  - {{model: llama-3.1-8b, count: 1{decode_role}}}
workload: {{{arrival}, prompt_tokens: {{mean: 800}}, output_tokens: {{mean: 50}}}}
phases:
  - name: one
  - name: two
    start_seconds: 30
    {phase}
"""


def scenario_text(**edits: str) -> str:
    values = {
        "disaggregation": "disaggregation: {format: vllm-nixl}",
        "prefill_role": ", role: prefill",
        "decode_role": ", role: decode",
        "arrival": "rate_per_second: 2",
        "phase": "expected_stage: none",
    }
    return MINIMAL.format(**{**values, **edits})


@pytest.mark.parametrize(
    ("edits", "where"),
    [
        ({"disaggregation": ""}, "replicas[0].role"),
        ({"decode_role": ""}, "replicas[1].role"),
        ({"decode_role": ", role: prefill"}, "replicas"),
        ({"prefill_role": ", role: encoder"}, "replicas[0].role"),
        ({"disaggregation": "disaggregation: {format: trtllm}"}, "disaggregation.format"),
        ({"disaggregation": "disaggregation: {placement: far}"}, "disaggregation.placement"),
        ({"arrival": "arrival: closed, clients: 10"}, "workload.arrival"),
        ({"phase": "expected_by_role: {router: none}"}, "phases[1].expected_by_role.router"),
        ({"phase": "expected_by_role: {decode: sluggish}"}, "phases[1].expected_by_role.decode"),
        ({"phase": "disaggregation: {placement: cross-node, format: sglang}"}, "phases[1].disaggregation.format"),
    ],
)
def test_disaggregated_scenario_errors_name_the_key(edits: dict[str, str], where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_scenario(scenario_text(**edits), "test")
    assert caught.value.where == where


def test_a_phase_moves_the_pair_and_expects_a_stage_per_role() -> None:
    text = scenario_text(phase="expected_stage: kv_transfer\n    expected_by_role: {prefill: none}\n    "
                         "disaggregation: {placement: cross-node}")  # fmt: skip
    scenario = parse_scenario(text, "test")
    first, second = scenario.phases
    assert first.disaggregation is not None and first.disaggregation.placement == "same-node"
    assert second.disaggregation is not None and second.disaggregation.placement == "cross-node"
    assert (second.expected_for("prefill"), second.expected_for("decode")) == ("none", "kv_transfer")
    assert scenario.stages_text == "none -> kv_transfer (prefill: none)"


def test_every_request_is_prefilled_handed_over_and_decoded() -> None:
    node = SimulatedNode(load_scenario("pd-transfer-bound"), record_requests=True)
    node.advance(30.0)
    prefill = [r for r in node.replicas if isinstance(r, PrefillReplica)]
    decode = [r for r in node.replicas if isinstance(r, DecodeReplica)]
    assert len(prefill) == len(decode) == 4
    prefilled = {q.id for r in prefill for q in r.finished or [] if q.finish_reason != "rejected"}
    decoded = [q for r in decode for q in r.finished or []]
    assert len(decoded) > 200
    # Each decoded request was prefilled first, generating its one token there, and more here.
    assert {q.id for q in decoded} <= prefilled
    assert all(q.generated > 1 or q.target_tokens == 1 for q in decoded)
    for replica in prefill:
        assert all(q.generated == 1 for q in replica.finished or [])
        # What the decode side has read is freed: only hand-overs still in flight hold blocks.
        held = sum(q.blocks for q in replica.held.values())
        assert replica.kv.used_blocks == held + sum(q.blocks for q in replica.running)
    transfers = sum(r.pd.transfers for r in decode)
    assert transfers == sum(r.pd.histograms["nixl_xfer_time_seconds"].count for r in decode) >= len(decoded)


def test_kv_crosses_nvlink_on_one_node_and_rdma_across_eight_times_slower() -> None:
    node = SimulatedNode(load_scenario("pd-transfer-bound"))
    node.advance(149.0)  # same-node: before the pair moves
    decode = [r for r in node.replicas if isinstance(r, DecodeReplica)]
    port_rx = sum(p.values["port_rcv_data"] for p in node.ports) * 4
    same = [r.pd.histograms["nixl_xfer_time_seconds"] for r in decode]
    same_mean = sum(h.sum for h in same) / sum(h.count for h in same)
    moved = sum(r.pd.bytes for r in decode)
    assert sum(g.counters.nvlink_bytes for g in node.gpus) == pytest.approx(2 * moved)  # both ends
    # Cross-node without the other job's traffic: the same reads over the decode GPUs' NICs.
    quiet = parse_scenario(
        load_scenario_text("pd-transfer-bound").replace("background_utilization: 0.65", "background_utilization: 0"),
        "quiet",
    )
    crossing = SimulatedNode(quiet)
    crossing.advance(149.0)
    sums = [(r.pd.histograms["nixl_xfer_time_seconds"].sum, r.pd.histograms["nixl_xfer_time_seconds"].count)
            for r in crossing.replicas if isinstance(r, DecodeReplica)]  # fmt: skip
    before_sum, before_count = sum(s for s, _ in sums), sum(c for _, c in sums)
    rx_before = sum(p.values["port_rcv_data"] for p in crossing.ports)
    read_before = sum(r.pd.bytes for r in crossing.replicas if isinstance(r, DecodeReplica))
    crossing.advance(180.0)
    after = [r.pd.histograms["nixl_xfer_time_seconds"] for r in crossing.replicas if isinstance(r, DecodeReplica)]
    cross_mean = (sum(h.sum for h in after) - before_sum) / (sum(h.count for h in after) - before_count)
    assert 6.0 < cross_mean / same_mean < 10.0  # "8x slower than within a node"
    received = (sum(p.values["port_rcv_data"] for p in crossing.ports) - rx_before) * 4
    read = sum(r.pd.bytes for r in crossing.replicas if isinstance(r, DecodeReplica)) - read_before
    assert read < received < 1.2 * read  # the KV reached the decode GPUs' NICs, beside housekeeping
    assert port_rx < moved / 10  # housekeeping only while the pair shared NVLink


def load_scenario_text(name: str) -> str:
    from importlib import resources

    return resources.files("exporter.simulate").joinpath("scenarios", f"{name}.yaml").read_text("utf-8")


def _families(text: str) -> dict[str, object]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_vllm_text_carries_the_nixl_connector_where_vllm_registers_it() -> None:
    node = SimulatedNode(load_scenario("pd-transfer-bound"))
    node.advance(20.0)
    prefill, decode = node.replicas[0], node.replicas[4]
    for replica in (prefill, decode):
        text = render_vllm(replica, 1.7e9)
        families = _families(text)
        assert "vllm:nixl_xfer_time_seconds" in families and "vllm:num_requests_kv_fetch_by_stage" in families
        # NixlPromMetrics registers before the perf counters, the fetch stages after waiting_by_reason.
        assert text.index("vllm:nixl_xfer_time_seconds") < text.index("vllm:estimated_flops_per_gpu")
        assert text.index("vllm:num_requests_waiting_by_reason") < text.index("vllm:num_requests_kv_fetch_by_stage")
    decode_text = render_vllm(decode, 1.7e9)
    assert 'vllm:nixl_xfer_time_seconds_bucket{engine="0",le="0.005",model_name=' in decode_text
    external = [
        line for line in decode_text.splitlines() if 'source="external_kv_transfer"' in line and "_total" in line
    ]
    assert external and float(external[0].split()[-1]) > 0
    prefill_reads = [
        line for line in render_vllm(prefill, 1.7e9).splitlines() if "nixl_xfer_time_seconds_count" in line
    ]
    assert prefill_reads and float(prefill_reads[0].split()[-1]) == 0  # reads are timed where they are driven


def test_sglang_text_has_the_role_label_the_pd_queues_and_its_histograms() -> None:
    node = SimulatedNode(load_scenario("pd-healthy"))
    node.advance(20.0)
    prefill, decode = node.replicas[0], node.replicas[4]
    assert isinstance(prefill, PrefillReplica) and isinstance(decode, DecodeReplica)
    for replica, role in ((prefill, "prefill"), (decode, "decode")):
        text = render_sglang(replica)
        families = _families(text)
        running = next(iter(families["sglang:num_running_reqs"].samples))  # type: ignore[attr-defined]
        assert running.labels["engine_type"] == role
        assert "_created" not in text  # multiprocess mode
        for name in ("sglang:num_prefill_inflight_queue_reqs", "sglang:num_decode_transfer_queue_reqs"):
            assert name in families
    sent = _families(render_sglang(prefill))["sglang:kv_transfer_latency_ms"]
    count = next(s.value for s in sent.samples if s.name.endswith("_count"))  # type: ignore[attr-defined]
    assert count > 0  # the sender times the transfer
    speeds = _families(render_sglang(prefill))["sglang:kv_transfer_speed_gb_s"]
    total = {s.name: s.value for s in speeds.samples if not s.name.endswith("_bucket")}  # type: ignore[attr-defined]
    mean_speed = total["sglang:kv_transfer_speed_gb_s_sum"] / total["sglang:kv_transfer_speed_gb_s_count"]
    assert mean_speed > 360 and math.isfinite(mean_speed)  # overstated past NVLink's 360 GB/s, as SGLang does
