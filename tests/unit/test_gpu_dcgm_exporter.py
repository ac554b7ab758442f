"""Mapping real dcgm-exporter captures (tests/fixtures/dcgm-exporter) to `llm_gpu_*` readings."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.attribution import PodContainer
from exporter.sources.gpu_exporters.dcgm_exporter import readings_from_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dcgm-exporter"
T4 = "dcgm-exporter-t4-pods-runai-1-workload.prom"
A100_MIG = "dcgm-exporter-a100-mig-runai-4-active-workloads.prom"
MIB = 2**20


def capture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def readings(text: str):
    found, owners = readings_from_text(text)
    return {(r.index, r.labels.get("gpu_i_id", "")): (r, o) for r, o in zip(found, owners)}


def test_t4_capture_values_in_our_units():
    gpus = readings(capture(T4))
    gpu0, pods0 = gpus[("0", "")]
    assert gpu0.uuid == "GPU-7a2e92f2-be71-d37e-a744-541600ffc722" and gpu0.model == "Tesla T4"
    assert gpu0.values == {
        "llm_gpu_sm_clock_hertz": 585e6,
        "llm_gpu_temperature_celsius": 55.0,
        "llm_gpu_power_watts": 28.722,
        "llm_gpu_utilization_ratio": 0.0,
        "llm_gpu_memory_used_bytes": 128 * MIB,
        "llm_gpu_memory_total_bytes": (128 + 14831) * MIB,
        "llm_gpu_tensor_active_ratio": 0.0,
        "llm_gpu_dram_active_ratio": 0.000002,
        "llm_gpu_pcie_transmit_bytes_per_second": 79221.0,
        "llm_gpu_pcie_receive_bytes_per_second": 420785.0,
    }
    assert pods0 == frozenset(
        {PodContainer("runai-reservation", "runai-reservation-gpu-qa-mig-worker-gpu-1-kvltw", "runai-reservation")}
    )


def test_empty_pod_labels_mean_no_pod():
    gpu1, pods1 = readings(capture(T4))[("1", "")]
    assert pods1 == frozenset()
    assert gpu1.values["llm_gpu_memory_used_bytes"] == 5 * MIB


def test_mig_instances_are_separate_readings_with_instance_labels():
    gpus = readings(capture(A100_MIG))
    assert sorted(gpus) == [("0", "5"), ("0", "7"), ("0", "8"), ("0", "9")]
    instance, _ = gpus[("0", "8")]
    assert instance.labels == {"gpu_i_id": "8", "gpu_i_profile": "1g.5gb"}
    assert instance.values["llm_gpu_memory_used_bytes"] == 4384 * MIB
    assert instance.values["llm_gpu_memory_total_bytes"] == (4384 + 480) * MIB
    assert instance.values["llm_gpu_dram_active_ratio"] == 0.250816
    assert "llm_gpu_utilization_ratio" not in instance.values  # GPU_UTIL is not exported under MIG


def test_hostname_label_spelling_does_not_matter():
    old = capture(T4)
    new = old.replace('Hostname="', 'hostname="')
    assert new != old
    assert [r.__dict__ for r in readings_from_text(new)[0]] == [r.__dict__ for r in readings_from_text(old)[0]]


def test_dcgm_4_6_field_names_read_like_the_old_ones():
    old = capture(T4)
    renamed = (
        old.replace("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS")
        .replace("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS")
        .replace("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO")
        .replace("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO")
        .replace("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO")
    )
    assert [r.values for r in readings_from_text(renamed)[0]] == [r.values for r in readings_from_text(old)[0]]


def test_percent_utilization_becomes_a_ratio():
    text = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="X"} 87\n'
    assert readings_from_text(text)[0][0].values == {"llm_gpu_utilization_ratio": 0.87}


@pytest.mark.parametrize("sentinel", ["9223372036854775794", "140737488355328", "1.40737488355328e+16", "NaN"])
def test_dcgm_blank_sentinels_are_dropped(sentinel):
    text = (
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="0",UUID="GPU-a",modelName="X"}} {sentinel}\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="X"} 70.5\n'
    )
    reading = readings_from_text(text)[0][0]
    assert reading.values == {"llm_gpu_power_watts": 70.5}


def test_old_namespace_labels_and_lowercase_uuid():
    text = (
        'DCGM_FI_DEV_FB_USED{gpu="3",uuid="GPU-b",modelName="X",pod_name="p",pod_namespace="ns",container_name="c"}'
        " 10\n"
    )
    found, owners = readings_from_text(text)
    assert found[0].uuid == "GPU-b" and owners[0] == frozenset({PodContainer("ns", "p", "c")})


def test_throttle_bitmask_is_kept_for_per_reason_series():
    text = 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="0",UUID="GPU-a",modelName="X"} 68\n'
    assert readings_from_text(text)[0][0].throttle_reasons == 68


def test_fragments_with_only_unmapped_families_still_list_their_gpus():
    found, _ = readings_from_text(capture("dcgm-exporter-a30-mig-issue317.prom"))
    assert {(r.index, r.labels["gpu_i_id"]) for r in found} == {
        ("0", "3"),
        ("0", "4"),
        ("0", "5"),
        ("0", "6"),
        ("1", "3"),
        ("1", "4"),
    }
