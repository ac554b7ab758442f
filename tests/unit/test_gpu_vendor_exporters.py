"""Mapping real captures of AMD's, Huawei's and Intel's device exporters (tests/fixtures/*-exporter)
to `llm_gpu_*` readings: every value below was read off the capture by hand, in our units."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.attribution import PodContainer
from exporter.catalogue import CATALOGUE
from exporter.sources.amd_exporter import AMD_EXPORTER, AmdExporterSource
from exporter.sources.ascend_exporter import ASCEND_EXPORTER, AscendExporterSource
from exporter.sources.base import SourceError
from exporter.sources.device_exporter import readings_from_text
from exporter.sources.gaudi_exporter import GAUDI_EXPORTER
from tests.support import RouteServer, respond_with

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIB = 2**20


def capture(directory: str, name: str) -> str:
    return (FIXTURES / directory / name).read_text(encoding="utf-8")


def by_index(spec, text):
    found, owners = readings_from_text(spec, text)
    return {r.index: (r, o) for r, o in zip(found, owners)}


def test_every_family_a_spec_fills_is_in_the_catalogue():
    for spec in (AMD_EXPORTER, ASCEND_EXPORTER, GAUDI_EXPORTER):
        families = {f for f, _ in spec.metrics.values()} | {t.family for t in spec.labelled.values()}
        assert families <= set(CATALOGUE), spec.vendor


def test_amd_radeon_capture_memory_in_bytes_and_no_partition_labels():
    gpus = by_index(AMD_EXPORTER, capture("amd-exporter", "radeon-issue-259.txt"))
    assert list(gpus) == ["0"]
    gpu, pods = gpus["0"]
    # gpu_used_vram 26 (MB); no gpu_total_vram in the capture: the total stays absent, not derived.
    assert gpu.values == {"llm_gpu_memory_used_bytes": 26 * MIB}
    assert gpu.vendor == "amd" and gpu.uuid == "" and gpu.model == ""
    # gpu_partition_id="NA" and partition types "none" mean unpartitioned: no labels for them.
    assert gpu.labels == {} and pods == frozenset()


def test_amd_mi300x_vf_capture_ids_and_partition_modes():
    gpu, _ = by_index(AMD_EXPORTER, capture("amd-exporter", "mi300x-vf-issue-171.txt"))["0"]
    assert gpu.uuid == "17ff74b5-0000-1000-805c-37b0fbe69430"
    assert gpu.model == "Aqua Vanjaram [Instinct MI300X VF]"  # card_model="" falls back to card_series
    assert gpu.labels == {"gpu_partition_id": "0", "compute_partition": "spx", "memory_partition": "nps1"}
    assert gpu.values == {"llm_gpu_temperature_celsius": 0.0}  # gpu_edge_temperature 0


def test_amd_pr_219_capture_gfx_activity_and_na_model():
    gpus = by_index(AMD_EXPORTER, capture("amd-exporter", "mi210-mi325x-pr-219.txt"))
    mi210, _ = gpus["0"]
    assert mi210.model == "AMD Instinct MI210"  # card_model="N/A" is no model
    assert mi210.uuid == "88ff740f-0000-1000-80d1-1183b20a9869"
    assert mi210.values == {"llm_gpu_utilization_ratio": 0.0}
    mi325x, _ = gpus["7"]
    assert mi325x.uuid == "27ff74b9-0000-1000-80f7-cf00e06ab2b5" and mi325x.model == ""
    assert mi325x.labels == {"compute_partition": "spx", "memory_partition": "nps1"}


def test_amd_average_package_power_is_watts():
    gpu, _ = by_index(AMD_EXPORTER, capture("amd-exporter", "strix-halo-issue-353.txt"))["0"]
    assert gpu.values == {"llm_gpu_power_watts": 0.0}


def test_amd_xgmi_links_summed_in_bytes():
    gpus = by_index(AMD_EXPORTER, capture("amd-exporter", "metricslist-xgmi.txt"))
    gpu, _ = gpus["0"]
    rx_kb = [0, 2.776148269e09, 2.914491813e09, 2.853215723e09, 2.857943554e09, 2.859773597e09, 2.852296682e09]
    rx_kb.append(2.757052542e09)
    tx_kb = [0, 3.539423344e09, 3.708415141e09, 3.639806555e09, 3.675549728e09, 3.657430314e09, 3.646094607e09]
    tx_kb.append(3.545990503e0)  # upstream's sample is cut short; read as printed
    labelled = {(family, own["link"]): value for family, own, value in gpu.labelled}
    assert labelled == {
        ("llm_gpu_interconnect_receive_bytes_total", "xgmi"): pytest.approx(sum(rx_kb) * 1024),
        ("llm_gpu_interconnect_transmit_bytes_total", "xgmi"): pytest.approx(sum(tx_kb) * 1024),
    }
    # gpu_clock is read for presence only: GPUs 3 and 5 exist, with nothing mapped.
    assert sorted(gpus) == ["0", "3", "5"] and gpus["3"][0].values == {} and gpus["5"][0].labelled == []


def test_amd_prefixed_names_read_like_plain_ones():
    text = capture("amd-exporter", "radeon-issue-259.txt").replace("gpu_used_vram{", "amd_gpu_used_vram{")
    gpu, _ = by_index(AMD_EXPORTER, text)["0"]
    assert gpu.values == {"llm_gpu_memory_used_bytes": 26 * MIB}


def test_amd_pod_labels_become_owners():
    text = capture("amd-exporter", "radeon-issue-259.txt")
    line = next(line for line in text.splitlines() if line.startswith("gpu_used_vram{"))
    assigned = line.replace('namespace=""', 'namespace="llm"').replace('pod=""', 'pod="vllm-0"')
    assigned = assigned.replace('container=""', 'container="engine"')
    _, pods = by_index(AMD_EXPORTER, assigned)["0"]
    assert pods == frozenset({PodContainer("llm", "vllm-0", "engine")})


def test_ascend_upstream_testdata_eight_chips_idle_and_healthy():
    chips = by_index(ASCEND_EXPORTER, capture("ascend-exporter", "mind-cluster-testdata.txt"))
    assert sorted(chips, key=int) == [str(i) for i in range(8)]
    for chip, pods in chips.values():
        assert chip.vendor == "ascend" and chip.model == "910Awn-Ascend-V1" and pods == frozenset()
        # Every value in upstream's expectation is 0 except health_status 1 (healthy).
        assert chip.values == {
            "llm_gpu_utilization_ratio": 0.0,
            "llm_gpu_memory_used_bytes": 0.0,
            "llm_gpu_memory_total_bytes": 0.0,
            "llm_gpu_power_watts": 0.0,
            "llm_gpu_temperature_celsius": 0.0,
            "llm_gpu_sm_clock_hertz": 0.0,
            "llm_gpu_healthy": 1.0,
        }
        assert chip.labels == {}  # pcie_bus_info="" and vdie_id="" are unknown, not labels


def test_ascend_doc_sample_hbm_total_in_bytes_despite_timestamps():
    chips = by_index(ASCEND_EXPORTER, capture("ascend-exporter", "hiascend-api-doc.txt"))
    assert sorted(chips, key=int) == [str(i) for i in range(8)]
    for index in ("0", "1", "2"):
        assert chips[index][0].values == {"llm_gpu_memory_total_bytes": 32255 * MIB}
    assert chips["7"][0].values == {}  # only npu_chip_info_error_code: present, nothing mapped


def test_ascend_hbm_wins_over_ddr_and_pods_come_from_pod_name():
    text = (
        'npu_chip_info_used_memory{id="3",model_name="910B3",pod_name="p",namespace="n",container_name="c"} 100\n'
        'npu_chip_info_hbm_used_memory{id="3",model_name="910B3",pod_name="p",namespace="n",container_name="c"} 7\n'
        'npu_chip_info_hbm_bandwidth_utilization{id="3",model_name="910B3"} 85\n'
        'npu_chip_info_health_status{id="3",model_name="910B3"} 0\n'
    )
    chip, pods = by_index(ASCEND_EXPORTER, text)["3"]
    assert chip.values == {
        "llm_gpu_memory_used_bytes": 7 * MIB,
        "llm_gpu_dram_active_ratio": 0.85,
        "llm_gpu_healthy": 0.0,
    }
    assert pods == frozenset({PodContainer("n", "p", "c")})


def test_gaudi_constructed_sample_units():
    devices = by_index(GAUDI_EXPORTER, capture("gaudi-exporter", "constructed.txt"))
    gaudi, _ = devices["0"]
    assert gaudi.uuid == "01P0-HL2080A0-15-TNPS14-20-07-07" and gaudi.labels == {"pci_bus_id": "0000:19:00.0"}
    assert gaudi.values == {
        "llm_gpu_utilization_ratio": 0.42,
        "llm_gpu_memory_used_bytes": 9.1268055e10,
        "llm_gpu_memory_total_bytes": 1.02106171392e11,
        "llm_gpu_power_watts": 312.0,
        "llm_gpu_temperature_celsius": 47.0,
    }
    # No memory-bandwidth signal, and habanalabs_pcie_tx (unit undocumented) is not mapped.
    assert "llm_gpu_dram_active_ratio" not in gaudi.values and devices["1"][0].values["llm_gpu_power_watts"] == 98.0


def test_the_source_exports_vendor_labelled_series_over_http():
    server = RouteServer({"/metrics": respond_with(capture("amd-exporter", "mi300x-vf-issue-171.txt"))})
    try:
        source = AmdExporterSource(server.url("/metrics"))
        samples = {(m.name, m.labels.get("vendor"), m.labels.get("gpu")) for m in source.collect(0.0)}
        assert ("llm_gpu_up", "amd", "0") in samples and ("llm_gpu_temperature_celsius", "amd", "0") in samples
        source.close()
    finally:
        server.close()


def test_a_response_without_device_metrics_is_a_parse_error():
    server = RouteServer({"/metrics": respond_with("# nothing here\nup 1\n")})
    try:
        source = AscendExporterSource(server.url("/metrics"))
        with pytest.raises(SourceError) as caught:
            source.collect(0.0)
        assert caught.value.reason == "parse"
        source.close()
    finally:
        server.close()
