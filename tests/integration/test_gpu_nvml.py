"""The NVML source against the real nvidia-ml-py binding and the NVML stand-in library.

The stand-in (tests/nvml_stub) is compiled from NVIDIA's own nvml.h and loaded into this process
under its soname, so `pynvml.nvmlInit()` binds to it exactly as it would to the driver's library.
Each test writes its own state file; the library re-reads it when it is replaced. Building the
stand-in runs gcc (once per source), which is why these run in this tier and not in tests/unit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from exporter.sources.base import SourceError
from exporter.sources.gpu_common import START_UP_TIMEOUT_SECONDS
from exporter.sources.nvml import NvmlSource
from tests import nvml_stub
from tests.nvml_stub import GPM_DRAM_BW_UTIL, GPM_SM_UTIL, eight_gpu_node, with_changes, write_state

pytestmark = pytest.mark.integration


@pytest.fixture
def state(stub_loaded, tmp_path, monkeypatch):
    path = tmp_path / "nvml-state"
    write_state(path, eight_gpu_node())
    monkeypatch.setenv("NVML_STUB_STATE", str(path))
    return path


class FakeClock:
    """Monotonic time that moves only when the source sleeps or a test says a collection interval passed."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def source(state, clock):
    src = NvmlSource(first_window_seconds=0.0, clock=clock, sleep=clock.sleep)
    yield src
    src.close()


def next_interval(source, clock, seconds=5.0):
    clock.now += seconds
    return source.collect(clock.now)


def by_gpu(metrics, name):
    return {m.labels["gpu"]: m.value for m in metrics if m.name == name}


def test_reports_every_gpu_with_identity_and_units(source):
    assert source.deadline_seconds() == START_UP_TIMEOUT_SECONDS  # loading NVML and finding the GPUs
    metrics = source.collect(0.0)
    assert source.deadline_seconds() == source.timeout_seconds  # reading them
    assert by_gpu(metrics, "llm_gpu_up") == {str(i): 1.0 for i in range(8)}
    gpu2 = {m.name: m for m in metrics if m.labels["gpu"] == "2" and m.name != "llm_gpu_throttle_reason_active"}
    assert gpu2["llm_gpu_up"].labels == {
        "gpu": "2",
        "uuid": "GPU-00000002-5e1f-4c1a-9d2b-0000a0000002",
        "gpu_model": "NVIDIA H200",
        "vendor": "nvidia",
    }
    node = eight_gpu_node()["gpus"][2]
    assert gpu2["llm_gpu_memory_used_bytes"].value == node["memory_used"]
    assert gpu2["llm_gpu_memory_total_bytes"].value == node["memory_total"]
    assert gpu2["llm_gpu_utilization_ratio"].value == 0.52
    assert gpu2["llm_gpu_power_watts"].value == 302.0
    assert gpu2["llm_gpu_temperature_celsius"].value == 42.0
    assert gpu2["llm_gpu_sm_clock_hertz"].value == 1_412e6
    assert gpu2["llm_gpu_pcie_transmit_bytes_total"].value == 3_000_000
    assert gpu2["llm_gpu_nvlink_receive_bytes_total"].value == 12_000 * 1024


def test_gpm_ratios_only_on_gpus_that_support_gpm(source):
    metrics = source.collect(0.0)
    assert by_gpu(metrics, "llm_gpu_sm_active_ratio") == {"0": 0.45, "1": 0.46, "2": 0.47, "3": 0.48}
    assert by_gpu(metrics, "llm_gpu_dram_active_ratio") == {"0": 0.95, "1": 0.94, "2": 0.93, "3": 0.92}
    assert by_gpu(metrics, "llm_gpu_tensor_active_ratio")["3"] == 0.155
    assert by_gpu(metrics, "llm_gpu_sm_occupancy_ratio")["0"] == 0.30
    assert by_gpu(metrics, "llm_gpu_nvlink_transmit_bytes_per_second")["1"] == 2049.0 * 2**20
    assert by_gpu(metrics, "llm_gpu_pcie_receive_bytes_per_second")["0"] == 200.0 * 2**20


def test_first_collection_waits_one_window_later_ones_do_not(source, clock):
    source.collect(0.0)
    assert clock.sleeps == [0.1]  # the floor NVML sets between two GPM samples, once for all GPUs
    next_interval(source, clock)
    assert clock.sleeps == [0.1]


def test_collections_closer_than_the_gpm_floor_serve_the_last_window(source, clock, state):
    first = by_gpu(source.collect(0.0), "llm_gpu_sm_active_ratio")
    node = eight_gpu_node()
    node["gpus"][0]["gpm_metrics"][GPM_SM_UTIL] = 80.0
    write_state(state, node)
    clock.now += 0.01
    assert by_gpu(source.collect(clock.now), "llm_gpu_sm_active_ratio") == first


def test_gpm_window_follows_the_state_between_collections(source, clock, state):
    source.collect(0.0)
    node = eight_gpu_node()
    node["gpus"][0]["gpm_metrics"][GPM_SM_UTIL] = 80.0
    node["gpus"][0]["gpm_metrics"][GPM_DRAM_BW_UTIL] = 10.0
    write_state(state, node)
    metrics = next_interval(source, clock)
    assert by_gpu(metrics, "llm_gpu_sm_active_ratio")["0"] == 0.8
    assert by_gpu(metrics, "llm_gpu_dram_active_ratio")["0"] == 0.1


def test_lost_gpu_is_down_and_the_others_keep_their_values(source, clock, state):
    before = source.collect(0.0)
    write_state(state, with_changes(eight_gpu_node(), gpu5={"lost": True}))
    after = next_interval(source, clock)
    assert by_gpu(after, "llm_gpu_up") == {**{str(i): 1.0 for i in range(8)}, "5": 0.0}
    assert [m for m in after if m.labels["gpu"] == "5" and m.name != "llm_gpu_up"] == []
    # The lost GPU keeps its identity labels, so its series does not change name.
    assert next(m for m in after if m.name == "llm_gpu_up" and m.labels["gpu"] == "5").labels["uuid"].endswith("5")

    def unchanged(ms):
        return sorted((m.name, tuple(sorted(m.labels.items())), m.value) for m in ms if m.labels["gpu"] != "5")

    assert unchanged(after) == unchanged(before)


def test_gpu_that_comes_back_is_read_again(source, clock, state):
    write_state(state, with_changes(eight_gpu_node(), gpu5={"lost": True}))
    assert by_gpu(source.collect(0.0), "llm_gpu_up")["5"] == 0.0
    write_state(state, eight_gpu_node())
    metrics = next_interval(source, clock)
    assert by_gpu(metrics, "llm_gpu_up")["5"] == 1.0
    assert by_gpu(metrics, "llm_gpu_power_watts")["5"] == 305.0


def test_not_supported_omits_only_that_metric(source, state):
    write_state(state, with_changes(eight_gpu_node(), gpu4={"errors": {"power": 3}}))
    metrics = source.collect(0.0)
    assert "4" not in by_gpu(metrics, "llm_gpu_power_watts")
    assert by_gpu(metrics, "llm_gpu_up")["4"] == 1.0
    assert by_gpu(metrics, "llm_gpu_temperature_celsius")["4"] == 44.0


def test_any_other_per_gpu_error_marks_only_that_gpu_down(source, state):
    write_state(state, with_changes(eight_gpu_node(), gpu6={"errors": {"utilization": 999}}))
    assert by_gpu(source.collect(0.0), "llm_gpu_up") == {**{str(i): 1.0 for i in range(8)}, "6": 0.0}


def test_memory_falls_back_to_v1_where_the_driver_lacks_v2(source, state):
    write_state(state, with_changes(eight_gpu_node(), gpu1={"errors": {"memory_v2": 13}}))
    used = by_gpu(source.collect(0.0), "llm_gpu_memory_used_bytes")
    node = eight_gpu_node()["gpus"]
    assert used["1"] == node[1]["memory_used"] + node[1]["memory_reserved"]  # v1 counts reserved as used
    assert used["0"] == node[0]["memory_used"]


def test_throttle_reasons_one_series_per_reason(source):
    metrics = source.collect(0.0)
    gpu0 = {
        m.labels["reason"]: m.value
        for m in metrics
        if m.name == "llm_gpu_throttle_reason_active" and m.labels["gpu"] == "0"
    }
    assert gpu0["power_cap"] == 1.0 and gpu0["gpu_idle"] == 0.0 and len(gpu0) == 9


def test_xid_events_count_by_gpu_and_code(source, clock, state):
    node = eight_gpu_node()
    node["xid_events"] = [(3, 79), (3, 79), (1, 48)]
    write_state(state, node)
    metrics = source.collect(0.0)
    xids = {(m.labels["gpu"], m.labels["xid"]): m.value for m in metrics if m.name == "llm_gpu_xid_errors_total"}
    assert xids == {("3", "79"): 2.0, ("1", "48"): 1.0}
    node["xid_events"].append((3, 94))
    write_state(state, node)
    metrics = next_interval(source, clock)
    xids = {(m.labels["gpu"], m.labels["xid"]): m.value for m in metrics if m.name == "llm_gpu_xid_errors_total"}
    assert xids == {("3", "79"): 2.0, ("3", "94"): 1.0, ("1", "48"): 1.0}


def test_xid_counter_survives_its_gpu_being_lost(source, clock, state):
    source.collect(0.0)
    node = with_changes(eight_gpu_node(), gpu5={"lost": True})
    node["xid_events"] = [(5, 79)]  # "fallen off the bus", then the GPU answers no more
    write_state(state, node)
    metrics = next_interval(source, clock)
    assert [(m.name, m.value) for m in metrics if m.labels["gpu"] == "5"] == [
        ("llm_gpu_up", 0.0),
        ("llm_gpu_xid_errors_total", 1.0),
    ]


def test_running_pids_reach_attribution(source, state):
    seen = []

    class Recorder:
        def attribute(self, gpus):
            seen.extend(gpus)
            return [{"engine": "e"} if g.pids else {} for g in gpus]

    write_state(state, with_changes(eight_gpu_node(), gpu2={"compute_pids": [4242]}, gpu3={"graphics_pids": [4243]}))
    source._attributor = Recorder()
    metrics = source.collect(0.0)
    assert {g.index: g.pids for g in seen if g.pids} == {"2": frozenset({4242}), "3": frozenset({4243})}
    assert {m.labels["gpu"] for m in metrics if m.labels.get("engine") == "e"} == {"2", "3"}


def test_driver_not_loaded_makes_the_source_unavailable(stub_loaded, tmp_path, monkeypatch):
    monkeypatch.setenv("NVML_STUB_STATE", str(tmp_path / "absent"))
    with pytest.raises(SourceError) as raised:
        NvmlSource().collect(0.0)
    assert raised.value.reason == "unavailable"


def test_missing_library_makes_the_source_unavailable():
    class FakeError(Exception):
        def __init__(self, value):
            self.value = value

    def init():
        raise FakeError(12)  # NVML_ERROR_LIBRARY_NOT_FOUND, as pynvml raises it without the library

    fake = SimpleNamespace(NVMLError=FakeError, nvmlInit=init)
    source = NvmlSource(nvml=fake)  # type: ignore[arg-type]
    with pytest.raises(SourceError) as raised:
        source.collect(0.0)
    assert raised.value.reason == "unavailable"
    assert source.deadline_seconds() == START_UP_TIMEOUT_SECONDS  # start-up still ahead


def test_pynvml_not_installed_makes_the_source_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with pytest.raises(SourceError) as raised:
        NvmlSource().collect(0.0)
    assert raised.value.reason == "unavailable"


def test_stub_is_built_from_the_real_header():
    header = nvml_stub.find_nvml_header()
    assert header.name == "nvml.h" and "nvidia" in str(header)
    assert Path(nvml_stub.build_stub(), nvml_stub.SONAME).exists()


def test_auto_probe_sees_the_gpus(state):
    from exporter.sources.nvml import nvml_available

    assert nvml_available() == (True, "NVML sees 8 GPU(s)")


def test_process_lister_for_dcgm_maps_uuids_to_pids(state):
    from exporter.sources.nvml import NvmlProcessLister

    write_state(state, with_changes(eight_gpu_node(), gpu2={"compute_pids": [31, 32]}))
    lister = NvmlProcessLister()
    try:
        pids = lister.pids_by_uuid()
    finally:
        lister.close()
    assert pids["GPU-00000002-5e1f-4c1a-9d2b-0000a0000002"] == frozenset({31, 32})
    assert pids["GPU-00000000-5e1f-4c1a-9d2b-0000a0000000"] == frozenset()
