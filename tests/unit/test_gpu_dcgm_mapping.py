"""The DCGM mapping on its own: a typed `DcgmGpuReading` in, `llm_gpu_*` samples out (no pydcgm)."""

from __future__ import annotations

from exporter.sources.dcgm import gpu_reading
from exporter.sources.dcgm_reader import BASE_FIELDS, PROFILING_FIELDS, DcgmGpuReading
from exporter.sources.gpu_common import render_readings

MIB = 2**20


def values_of(reading: DcgmGpuReading) -> dict[str, float]:
    samples = render_readings([gpu_reading(reading)], [{}])
    return {s.name: s.value for s in samples if s.name != "llm_gpu_throttle_reason_active"}


def test_every_value_in_our_units():
    reading = DcgmGpuReading(
        gpu_id=1,
        uuid="GPU-b",
        device_name="NVIDIA H100 80GB HBM3",
        sm_clock_mhz=1980,
        gpu_temp_celsius=61,
        power_usage_watts=512.25,
        gpu_util_percent=87,
        fb_total_mib=81559,
        fb_used_mib=80000,
        fb_free_mib=1000,
        prof_sm_active=0.45,
        prof_sm_occupancy=0.3,
        prof_pipe_tensor_active=0.12,
        prof_dram_active=0.95,
        prof_pcie_tx_bytes=1.5e9,
        prof_pcie_rx_bytes=2.5e9,
        prof_nvlink_tx_bytes=3.0e10,
        prof_nvlink_rx_bytes=4.0e10,
    )
    assert values_of(reading) == {
        "llm_gpu_up": 1.0,
        "llm_gpu_sm_clock_hertz": 1980e6,
        "llm_gpu_temperature_celsius": 61.0,
        "llm_gpu_power_watts": 512.25,
        "llm_gpu_utilization_ratio": 0.87,
        "llm_gpu_memory_total_bytes": 81559 * MIB,
        "llm_gpu_memory_used_bytes": 80000 * MIB,
        "llm_gpu_sm_active_ratio": 0.45,
        "llm_gpu_sm_occupancy_ratio": 0.3,
        "llm_gpu_tensor_active_ratio": 0.12,
        "llm_gpu_dram_active_ratio": 0.95,
        "llm_gpu_pcie_transmit_bytes_per_second": 1.5e9,
        "llm_gpu_pcie_receive_bytes_per_second": 2.5e9,
        "llm_gpu_nvlink_transmit_bytes_per_second": 3.0e10,
        "llm_gpu_nvlink_receive_bytes_per_second": 4.0e10,
    }
    mapped = gpu_reading(reading)
    assert (mapped.index, mapped.uuid, mapped.model) == ("1", "GPU-b", "NVIDIA H100 80GB HBM3")


def test_total_memory_from_used_and_free_when_dcgm_has_no_total():
    reading = DcgmGpuReading(gpu_id=0, fb_used_mib=80000, fb_free_mib=1000)
    assert values_of(reading)["llm_gpu_memory_total_bytes"] == 81000 * MIB


def test_free_memory_alone_is_no_family():
    assert values_of(DcgmGpuReading(gpu_id=0, fb_free_mib=1000)) == {"llm_gpu_up": 1.0}


def test_a_gpu_without_any_value_is_down_and_keeps_its_xids():
    samples = render_readings([gpu_reading(DcgmGpuReading(gpu_id=2, uuid="GPU-c", xid_counts={79: 1.0}))], [{}])
    assert [(s.name, s.value) for s in samples] == [("llm_gpu_up", 0.0), ("llm_gpu_xid_errors_total", 1.0)]


def test_clocks_event_reasons_one_series_per_bit():
    samples = render_readings([gpu_reading(DcgmGpuReading(gpu_id=0, clocks_event_reasons=0x4))], [{}])
    active = {s.labels["reason"] for s in samples if s.name == "llm_gpu_throttle_reason_active" and s.value}
    assert active == {"power_cap"}


def test_field_ids_are_dcgms():
    # dcgm_fields.h: the IDs are DCGM's stable interface, unchanged by DCGM 4.6's renames.
    assert sorted(BASE_FIELDS) == [100, 112, 150, 155, 203, 250, 251, 252]
    assert sorted(PROFILING_FIELDS) == [1002, 1003, 1004, 1005, 1009, 1010, 1011, 1012]
