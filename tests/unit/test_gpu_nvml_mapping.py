"""The NVML mapping on its own: a typed `NvmlGpuReading` in, `llm_gpu_*` samples out.

No library is loaded: the readings are built by hand, in NVML's units, so each conversion
(percent → ratio, mW → W, MHz → Hz, KiB → bytes, MiB/s → bytes/s) is checked apart from reading.
The NVML names the reader and the shared throttle bits use are checked against nvidia-ml-py.
"""

from __future__ import annotations

import pynvml
import pytest

from exporter.sources import gpu_common
from exporter.sources.gpu_common import THROTTLE_REASONS, render_readings
from exporter.sources.nvml import gpu_reading
from exporter.sources.nvml_gpm import GPM_METRIC_NAMES, GpmMetrics
from exporter.sources.nvml_reader import (
    GPU_GONE_ERRORS,
    TRAFFIC_FIELDS,
    TRANSIENT_ERRORS,
    UNSUPPORTED_ERRORS,
    VALUE_MEMBERS,
    NvmlGpuReading,
    TrafficCounters,
)

MIB = 2**20


def values_of(reading: NvmlGpuReading) -> dict[str, float]:
    samples = render_readings([gpu_reading(reading)], [{}])
    return {s.name: s.value for s in samples if s.name != "llm_gpu_throttle_reason_active"}


def test_every_value_in_our_units():
    reading = NvmlGpuReading(
        index=3,
        uuid="GPU-3",
        name="NVIDIA H200",
        memory_used_bytes=1000,
        memory_total_bytes=4000,
        gpu_utilization_percent=47,
        power_milliwatts=302_500,
        temperature_celsius=42,
        sm_clock_mhz=1410,
        traffic=TrafficCounters(pcie_tx_bytes=10, pcie_rx_bytes=20, nvlink_tx_kib=3, nvlink_rx_kib=4),
        gpm=GpmMetrics(
            sm_util_percent=45.0,
            sm_occupancy_percent=30.0,
            any_tensor_util_percent=15.5,
            dram_bw_util_percent=95.0,
            pcie_tx_mib_per_second=100.0,
            pcie_rx_mib_per_second=200.0,
            nvlink_total_rx_mib_per_second=2048.0,
            nvlink_total_tx_mib_per_second=2049.0,
        ),
    )
    assert values_of(reading) == {
        "llm_gpu_up": 1.0,
        "llm_gpu_memory_used_bytes": 1000.0,
        "llm_gpu_memory_total_bytes": 4000.0,
        "llm_gpu_utilization_ratio": 0.47,
        "llm_gpu_power_watts": 302.5,
        "llm_gpu_temperature_celsius": 42.0,
        "llm_gpu_sm_clock_hertz": 1410e6,
        "llm_gpu_pcie_transmit_bytes_total": 10.0,
        "llm_gpu_pcie_receive_bytes_total": 20.0,
        "llm_gpu_nvlink_transmit_bytes_total": 3 * 1024.0,
        "llm_gpu_nvlink_receive_bytes_total": 4 * 1024.0,
        "llm_gpu_sm_active_ratio": 0.45,
        "llm_gpu_sm_occupancy_ratio": 0.30,
        "llm_gpu_tensor_active_ratio": 0.155,
        "llm_gpu_dram_active_ratio": 0.95,
        "llm_gpu_pcie_transmit_bytes_per_second": 100.0 * MIB,
        "llm_gpu_pcie_receive_bytes_per_second": 200.0 * MIB,
        "llm_gpu_nvlink_receive_bytes_per_second": 2048.0 * MIB,
        "llm_gpu_nvlink_transmit_bytes_per_second": 2049.0 * MIB,
    }


def test_identity_labels_and_pids_pass_through():
    mapped = gpu_reading(NvmlGpuReading(index=2, uuid="GPU-2", name="NVIDIA H200", pids=frozenset({7})))
    assert (mapped.index, mapped.uuid, mapped.model, mapped.pids) == ("2", "GPU-2", "NVIDIA H200", frozenset({7}))


def test_what_the_gpu_cannot_say_is_absent():
    reading = NvmlGpuReading(index=0, power_milliwatts=100_000, traffic=TrafficCounters(pcie_rx_bytes=5), gpm=None)
    assert values_of(reading) == {
        "llm_gpu_up": 1.0,
        "llm_gpu_power_watts": 100.0,
        "llm_gpu_pcie_receive_bytes_total": 5.0,
    }


def test_a_gpm_window_without_data_adds_nothing():
    assert values_of(NvmlGpuReading(index=0, gpm=GpmMetrics())) == {"llm_gpu_up": 1.0}


def test_a_down_gpu_keeps_only_up_and_its_xids():
    reading = NvmlGpuReading(index=5, uuid="GPU-5", up=False, power_milliwatts=1, xid_counts={79: 1.0})
    samples = render_readings([gpu_reading(reading)], [{}])
    assert [(s.name, s.labels, s.value) for s in samples] == [
        ("llm_gpu_up", {"gpu": "5", "uuid": "GPU-5", "vendor": "nvidia"}, 0.0),
        ("llm_gpu_xid_errors_total", {"gpu": "5", "uuid": "GPU-5", "vendor": "nvidia", "xid": "79"}, 1.0),
    ]


def test_clocks_event_reasons_one_series_per_bit():
    samples = render_readings([gpu_reading(NvmlGpuReading(index=0, clocks_event_reasons=0x44))], [{}])
    active = {s.labels["reason"]: s.value for s in samples if s.name == "llm_gpu_throttle_reason_active"}
    assert active == {reason: 1.0 if reason in ("power_cap", "hw_thermal") else 0.0 for _, reason in THROTTLE_REASONS}


@pytest.mark.parametrize(
    "name", [n for n in dir(gpu_common) if n.startswith("nvmlClocksEventReason")], ids=lambda name: name
)
def test_throttle_bits_are_nvidia_ml_pys(name):
    assert getattr(gpu_common, name) == getattr(pynvml, name)


def test_every_nvml_name_the_reader_uses_is_in_nvidia_ml_py():
    names = [
        *GPM_METRIC_NAMES.values(),
        *(name for name, _ in TRAFFIC_FIELDS.values()),
        *UNSUPPORTED_ERRORS,
        *TRANSIENT_ERRORS,
        *GPU_GONE_ERRORS,
        *(name for name, _ in VALUE_MEMBERS),
    ]
    assert [name for name in names if not hasattr(pynvml, name)] == []
