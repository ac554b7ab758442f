"""Mapping real captures of AMD's, Huawei's and Intel's device exporters (tests/fixtures/*-exporter)
to `llm_gpu_*` readings: every value below was read off the capture by hand, in our units."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.attribution import Attributor, PodContainer
from exporter.catalogue import CATALOGUE
from exporter.settings import GpuAttribution
from exporter.sources.base import SourceError, collect_now
from exporter.sources.device_exporter import readings_from_text
from exporter.sources.gpu_common import PERCENT
from exporter.sources.gpu_exporters.amd_exporter import AMD_EXPORTER, AmdExporterSource
from exporter.sources.gpu_exporters.ascend_exporter import ASCEND_EXPORTER, AscendExporterSource
from exporter.sources.gpu_exporters.gaudi_exporter import GAUDI_EXPORTER, GaudiExporterSource
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


def test_amd_pr_558_prefixed_package_power_nonzero_watts():
    gpus = by_index(AMD_EXPORTER, capture("amd-exporter", "mi300x-package-power-pr-558.txt"))
    assert sorted(gpus) == ["0", "1"]
    gpu0, _ = gpus["0"]
    # amd_gpu_package_power 139 and 136 (W) as pasted; serial_number redacted to "xxxxx" upstream.
    assert gpu0.values == {"llm_gpu_power_watts": 139.0} and gpus["1"][0].values == {"llm_gpu_power_watts": 136.0}
    assert gpu0.model == "102-G30211-00" and gpu0.uuid == "xxxxx"
    # gpu_partition_id="0" is a partition id even in an unpartitioned ("none") compute mode.
    assert gpu0.labels == {"gpu_partition_id": "0", "memory_partition": "nps1"}


def test_amd_pr_236_card_model_wins_and_uuid_over_serial():
    gpu, pods = by_index(AMD_EXPORTER, capture("amd-exporter", "mi300x-oam-pr-236.txt"))["0"]
    assert gpu.model == "102-G30211-0C"  # card_model before card_series "AMD Instinct MI300X OAM"
    assert gpu.uuid == "a8ff74a1-0000-1000-807e-843c9b9a1d73"  # gpu_uuid before serial_number 692407004236
    assert gpu.values == {"llm_gpu_utilization_ratio": 0.0} and pods == frozenset()
    assert gpu.labels == {"compute_partition": "spx", "memory_partition": "nps1"}


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


def test_ascend_failed_readings_minus_one_stay_absent():
    # npu-exporter writes -1 for a reading it failed to take (common_utils.go doUpdateMetric), health
    # "Unknown" included: chip 0's lines of upstream's test data with that value.
    lines = [
        line.replace("} 0 ", "} -1 ")
        for line in capture("ascend-exporter", "mind-cluster-testdata.txt").splitlines()
        if 'id="0"' in line
        and line.startswith(("npu_chip_info_temperature{", "npu_chip_info_health_status{", "npu_chip_info_power{"))
    ]
    assert len(lines) == 3
    text = "\n".join(lines).replace("} 1 ", "} -1 ") + "\n"
    chip, _ = by_index(ASCEND_EXPORTER, text)["0"]
    assert chip.values == {}  # the chip is still there, with nothing claimed about it


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


# The die id and PCI address of each chip in mind-cluster-docs-api-sample.txt (lines 8-15), by id.
ASCEND_DOC_CHIPS = {
    "0": ("185011D4-21104518-A0C4ED94-14CC040A-56102003", "0000:61:00.0"),
    "1": ("185011D4-21E04718-93B2ED94-14CC040A-BF102003", "0000:DB:00.0"),
    "2": ("185011D4-20C02418-59D4ED94-14CC040A-F9102003", "0000:B2:00.0"),
    "3": ("185011D4-21502C18-0464ED94-14CC040A-6E102003", "0000:3E:00.0"),
    "4": ("185011D4-21A02418-64946D94-14CC040A-F8102003", "0000:60:00.0"),
    "5": ("185011DC-21F02B18-C4B66D94-14CC040A-57102003", "0000:DA:00.0"),
    "6": ("185011D4-20602118-14646D94-14CC040A-8A102003", "0000:B1:00.0"),
    "7": ("185011D4-21504C18-10656D94-14CC040A-6B102003", "0000:3D:00.0"),
}


def test_ascend_docs_sample_ids_model_and_ai_core_clock():
    chips = by_index(ASCEND_EXPORTER, capture("ascend-exporter", "mind-cluster-docs-api-sample.txt"))
    assert sorted(chips) == sorted(ASCEND_DOC_CHIPS)
    for index, (vdie_id, bus) in ASCEND_DOC_CHIPS.items():
        chip, pods = chips[index]
        assert (chip.uuid, chip.labels, chip.model) == (vdie_id, {"pci_bus_id": bus}, "910A-Ascend-V1")
        # npu_chip_info_aicore_current_freq 1000 (MHz) on every chip; bandwidth_rx is not mapped.
        assert chip.values == {"llm_gpu_sm_clock_hertz": 1e9} and pods == frozenset()


GAUDI_CAPTURE = "from-source-1.24.0.txt"


def test_gaudi_capture_labels_as_the_exporter_writes_them():
    devices = by_index(GAUDI_EXPORTER, capture("gaudi-exporter", GAUDI_CAPTURE))
    assert sorted(devices) == ["0", "1"]  # the `id` label, HLML's device index
    gaudi0, pods0 = devices["0"]
    assert gaudi0.vendor == "gaudi" and gaudi0.uuid == "01P0-HL2080A0-15-TNPS14-20-07-07"
    # No model and no PCI-address label exist in this exporter; the serial is the plugin's device ID.
    assert gaudi0.model == "" and gaudi0.labels == {} and gaudi0.device_ids == ("AM10021523",)
    assert pods0 == frozenset({PodContainer("llm", "vllm-gaudi-0", "")})  # pod_namespace/pod_name, no container
    gaudi1, pods1 = devices["1"]
    assert gaudi1.uuid == "AM10021524" and pods1 == frozenset()  # UUID="na": the serial stands in


def test_gaudi_capture_every_mapped_value():
    devices = by_index(GAUDI_EXPORTER, capture("gaudi-exporter", GAUDI_CAPTURE))
    # Read off the capture: habanalabs_utilization 42 / 0, memory_used_bytes 9.126805504e+10 / 786432,
    # memory_total_bytes 1.02106171392e+11, power_mW 312000 / 98000, temperature_onchip 47 / 31,
    # clock_soc_mhz 1600 / 1600.
    assert devices["0"][0].values == {
        "llm_gpu_utilization_ratio": 0.42,
        "llm_gpu_memory_used_bytes": 91_268_055_040.0,
        "llm_gpu_memory_total_bytes": 102_106_171_392.0,
        "llm_gpu_power_watts": 312.0,
        "llm_gpu_temperature_celsius": 47.0,
        "llm_gpu_sm_clock_hertz": 1.6e9,
    }
    assert devices["1"][0].values == {
        "llm_gpu_utilization_ratio": 0.0,
        "llm_gpu_memory_used_bytes": 786_432.0,
        "llm_gpu_memory_total_bytes": 102_106_171_392.0,
        "llm_gpu_power_watts": 98.0,
        "llm_gpu_temperature_celsius": 31.0,
        "llm_gpu_sm_clock_hertz": 1.6e9,
    }
    # No memory-bandwidth signal; accelerator_power_usage_watts (312000, milliwatts despite the
    # name) and the PCIe counters (unit undocumented) are not read.


class _NoProcesses:
    def lookup(self):
        return {}


class _KubeletDevices:
    """The pod-resources answer: device plugin ID → the containers holding it."""

    def __init__(self, devices):
        self.devices = devices

    def available(self):
        return True

    def list_gpu_devices(self):
        return self.devices

    def close(self):
        pass


def test_gaudi_pod_from_the_kubelet_by_serial_when_the_exporter_names_none():
    kubelet = _KubeletDevices({"AM10021524": {PodContainer("batch", "trainer-0", "main")}})
    attributor = Attributor(GpuAttribution(), (), processes=_NoProcesses(), pod_client=kubelet)
    server = RouteServer({"/metrics": respond_with(capture("gaudi-exporter", GAUDI_CAPTURE))})
    try:
        source = GaudiExporterSource(server.url("/metrics"), attributor)
        up = {m.labels["gpu"]: m.labels for m in collect_now(source, 0.0) if m.name == "llm_gpu_up"}
        source.close()
    finally:
        server.close()
    assert (up["1"]["namespace"], up["1"]["pod"], up["1"]["container"]) == ("batch", "trainer-0", "main")
    assert (up["0"]["namespace"], up["0"]["pod"]) == ("llm", "vllm-gaudi-0") and "container" not in up["0"]
    assert up["0"]["vendor"] == up["1"]["vendor"] == "gaudi"


def test_gaudi_rate_limit_answer_is_a_down_round_not_a_parse():
    # The exporter's rateLimit (main.go) answers http.Error(w, "rate limiting exceeded", 429).
    server = RouteServer({"/metrics": respond_with("rate limiting exceeded\n", status=429)})
    try:
        source = GaudiExporterSource(server.url("/metrics"))
        with pytest.raises(SourceError) as caught:
            collect_now(source, 0.0)
        assert caught.value.reason == "http_status" and "429" in str(caught.value)
        source.close()
    finally:
        server.close()


def upstream(directory, name):
    """(metric name → help, label names) of an upstream names file (tests/fixtures/*/upstream-names-*.tsv)."""
    metrics, labels = {}, set()
    for line in (FIXTURES / directory / name).read_text(encoding="utf-8").splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "metric":
            wire, _, help_text = rest.partition("\t")
            metrics[wire] = help_text
        elif kind == "labels":
            labels.update(rest.partition("\t")[0].split(","))
    return metrics, labels


def spec_labels(spec):
    pods = {name for names in spec.pod_labels for name in names}
    return {*spec.index_labels, *spec.uuid_labels, *spec.model_labels, *spec.id_labels, *spec.device_id_labels, *pods}


@pytest.mark.parametrize(
    "spec, directory, name",
    [
        (AMD_EXPORTER, "amd-exporter", "upstream-names-afd0fe81.tsv"),
        (ASCEND_EXPORTER, "ascend-exporter", "upstream-names-22bb3d98.tsv"),
        (GAUDI_EXPORTER, "gaudi-exporter", "upstream-names-1.24.0.tsv"),
    ],
)
def test_every_wire_name_and_label_we_read_is_one_upstream_defines(spec, directory, name):
    metrics, labels = upstream(directory, name)
    assert sorted(spec.names() - set(metrics)) == []
    assert sorted(spec_labels(spec) - labels) == []


# Units as upstream's help strings state them (upstream-names-afd0fe81.tsv), against our scales.
AMD_UNITS = {
    "gpu_gfx_activity": ("Percentage (0-100)", PERCENT),
    "gpu_umc_activity": ("Percentage (0-100)", PERCENT),
    "gpu_prof_tensor_active_percent": ("percent", PERCENT),
    "gpu_prof_occupancy_percent": ("% of maximum", PERCENT),
    "gpu_used_vram": ("(in MB)", MIB),
    "gpu_total_vram": ("(in MB)", MIB),
    "gpu_package_power": ("in Watts", 1.0),
    "gpu_power_usage": ("in Watts", 1.0),
    "gpu_average_package_power": ("in Watts", 1.0),
    "gpu_junction_temperature": ("in Celsius", 1.0),
    "gpu_edge_temperature": ("in Celsius", 1.0),
}


def test_amd_units_agree_with_upstream_help():
    metrics, _ = upstream("amd-exporter", "upstream-names-afd0fe81.tsv")
    for wire, (unit, scale) in AMD_UNITS.items():
        assert unit in metrics[wire] and AMD_EXPORTER.metrics[wire][1] == scale, wire
    assert set(AMD_UNITS) == set(AMD_EXPORTER.metrics)
    assert "in KB" in metrics["gpu_xgmi_link_rx"] and AMD_EXPORTER.labelled["gpu_xgmi_link_rx"].scale == 1024
    assert metrics["gpu_health"] == "Health of the GPU (0 = Unhealthy | 1 = Healthy)"
    assert AMD_EXPORTER.healthy_values == frozenset({1.0})


def test_gaudi_units_agree_with_upstream_descriptions():
    metrics, _ = upstream("gaudi-exporter", "upstream-names-1.24.0.tsv")
    assert metrics["habanalabs_power_mW"] == "Power usage in milli-watts"
    assert metrics["habanalabs_memory_used_bytes"] == "Current used bytes of memory"
    assert metrics["habanalabs_temperature_onchip"] == "Chip temperature in celsius"
    assert GAUDI_EXPORTER.metrics["habanalabs_power_mW"][1] == 1e-3
    assert GAUDI_EXPORTER.metrics["habanalabs_memory_used_bytes"][1] == 1.0


def test_the_source_exports_vendor_labelled_series_over_http():
    server = RouteServer({"/metrics": respond_with(capture("amd-exporter", "mi300x-vf-issue-171.txt"))})
    try:
        source = AmdExporterSource(server.url("/metrics"))
        samples = {(m.name, m.labels.get("vendor"), m.labels.get("gpu")) for m in collect_now(source, 0.0)}
        assert ("llm_gpu_up", "amd", "0") in samples and ("llm_gpu_temperature_celsius", "amd", "0") in samples
        source.close()
    finally:
        server.close()


def test_a_response_without_device_metrics_is_a_parse_error():
    server = RouteServer({"/metrics": respond_with("# nothing here\nup 1\n")})
    try:
        source = AscendExporterSource(server.url("/metrics"))
        with pytest.raises(SourceError) as caught:
            collect_now(source, 0.0)
        assert caught.value.reason == "parse"
        source.close()
    finally:
        server.close()
