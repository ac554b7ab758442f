"""GPU links through the real nvidia-ml-py binding over the NVML stand-in (tests/nvml_stub, built
from NVIDIA's nvml.h): a GPU at PCIe x8 under load is named, the same link on an idle GPU is not
(GPUs train down when idle), a slot below the GPU is named apart, NVLink links down, errors rising
and the fabric's degraded-bandwidth bit are read."""

from __future__ import annotations

import pytest

from exporter.health.evaluate import NodeHealth
from exporter.sources.nvml import NvmlSource
from tests.nvml_stub import eight_gpu_node, with_changes, with_links, write_state

pytestmark = pytest.mark.integration


def linked_node() -> dict:
    state = with_links(eight_gpu_node())
    for index, gpu in enumerate(state["gpus"]):
        gpu["utilization_gpu"] = 80 if index < 6 else 0  # GPUs 6 and 7 idle
        gpu.pop("gpm_metrics", None)
        gpu["gpm"] = False
    return state


def findings(source: NvmlSource, health: NodeHealth, now: float) -> dict[tuple[str, str], str]:
    round_ = health.update(source.collect(now), now, wall=now)
    return {(f.kind, f.device): f.text for f in round_.findings}


def test_a_busy_gpu_at_x8_is_named_an_idle_one_is_not(stub_loaded, tmp_path, monkeypatch) -> None:
    path = tmp_path / "nvml-state"
    monkeypatch.setenv("NVML_STUB_STATE", str(path))
    write_state(path, linked_node())
    source, health = NvmlSource(first_window_seconds=0.0), NodeHealth()
    try:
        metrics = source.collect(1.0)
        widths = {(m.labels["gpu"], m.labels["bound"]): m.value for m in metrics if m.name == "llm_gpu_pcie_link_width"}
        assert widths[("0", "current")] == 16 and widths[("0", "max")] == 16
        assert {
            m.labels["state"]: m.value for m in metrics if m.name == "llm_gpu_nvlink_links" and m.labels["gpu"] == "0"
        } == {
            "active": 18.0,
            "inactive": 0.0,
        }
        assert findings(source, health, 2.0) == {}
        write_state(path, with_changes(linked_node(), gpu3={"pcie_width": 8}, gpu7={"pcie_width": 8, "pcie_gen": 1}))
        found = findings(source, health, 3.0)
        assert set(found) == {("pcie_downtrained", "GPU 3")}  # GPU 7 is idle: trained down to save power
        assert "PCIe Gen5 x8 while busy (0.80)" in found[("pcie_downtrained", "GPU 3")]
        assert "Gen5 x16" in found[("pcie_downtrained", "GPU 3")]
    finally:
        source.close()


def test_a_slot_below_the_gpu_nvlink_down_and_a_degraded_fabric(stub_loaded, tmp_path, monkeypatch) -> None:
    path = tmp_path / "nvml-state"
    monkeypatch.setenv("NVML_STUB_STATE", str(path))
    changes = {
        "gpu1": {"pcie_gen": 4, "pcie_max_gen": 4},  # a Gen5 GPU in a Gen4 slot: limited, trained as it can
        "gpu2": {"nvlink_states": [1] * 16 + [0, 0]},
        "gpu4": {"fabric_health_mask": 1},  # NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE
    }
    write_state(path, with_changes(linked_node(), **changes))
    source, health = NvmlSource(first_window_seconds=0.0), NodeHealth()
    try:
        found = findings(source, health, 1.0)
        assert set(found) == {
            ("pcie_slot_limited", "GPU 1"),
            ("nvlink_inactive", "GPU 2"),
            ("nvlink_inactive", "GPU 4"),
        }
        assert "2 of its 18 NVLink links inactive" in found[("nvlink_inactive", "GPU 2")]
        assert "degraded bandwidth" in found[("nvlink_inactive", "GPU 4")]
        assert "the slot allows PCIe Gen4, the GPU itself Gen5" in found[("pcie_slot_limited", "GPU 1")]
    finally:
        source.close()


def test_nvlink_errors_rising_are_named(stub_loaded, tmp_path, monkeypatch) -> None:
    import exporter.sources.nvml_links as links

    monkeypatch.setattr(links, "NVLINK_REFRESH_SECONDS", 0.0)
    path = tmp_path / "nvml-state"
    monkeypatch.setenv("NVML_STUB_STATE", str(path))
    write_state(path, linked_node())
    source, health = NvmlSource(first_window_seconds=0.0), NodeHealth()
    try:
        assert findings(source, health, 1.0) == {}
        crc_flit = 2  # NVML_NVLINK_ERROR_DL_CRC_FLIT
        write_state(path, with_changes(linked_node(), gpu5={f"nvlink_error.3.{crc_flit}": 12}))
        found = findings(source, health, 6.0)
        assert found == {("nvlink_errors", "GPU 5"): "12 NVLink crc_flit errors in 5 minutes, all links"}
    finally:
        source.close()
