"""GPU links read from dcgm-exporter where it is the GPU source, with the counters file we ship."""

from __future__ import annotations

from pathlib import Path

from exporter.health.evaluate import NodeHealth
from exporter.sources.gpu_common import render_readings
from exporter.sources.gpu_exporters.dcgm_exporter import LINK_FIELDS, readings_from_text

CSV = Path(__file__).resolve().parents[2] / "deploy" / "dcgm-exporter" / "counters.csv"
LABELS = 'gpu="{gpu}",UUID="GPU-{gpu}",pci_bus_id="00000000:{gpu}1:00.0",device="nvidia{gpu}",modelName="NVIDIA H100"'


def payload(width: dict[int, int], active: dict[int, float]) -> str:
    lines = []
    for gpu in (0, 1, 2):
        labels = LABELS.format(gpu=gpu)
        lines += [
            f"DCGM_FI_PROF_SM_ACTIVE{{{labels}}} {active[gpu]}",
            f"DCGM_FI_DEV_PCIE_LINK_GEN{{{labels}}} 5",
            f"DCGM_FI_DEV_PCIE_MAX_LINK_GEN{{{labels}}} 5",
            f"DCGM_FI_DEV_PCIE_LINK_WIDTH{{{labels}}} {width[gpu]}",
            f"DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH{{{labels}}} 16",
            f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{labels}}} 0",
        ]
    return "\n".join(lines) + "\n"


def test_a_busy_gpu_at_x8_from_dcgm_exporter_is_named() -> None:
    readings, _ = readings_from_text(payload({0: 16, 1: 8, 2: 8}, {0: 0.6, 1: 0.7, 2: 0.02}))
    samples = render_readings(readings, [{} for _ in readings])
    widths = {(s.labels["gpu"], s.labels["bound"]): s.value for s in samples if s.name == "llm_gpu_pcie_link_width"}
    assert widths == {("0", "current"): 16, ("0", "max"): 16, ("1", "current"): 8, ("1", "max"): 16,
                      ("2", "current"): 8, ("2", "max"): 16}  # fmt: skip
    found = NodeHealth().update(samples, 1.0, 1.0).findings
    assert [(f.kind, f.device, f.value) for f in found] == [("pcie_downtrained", "GPU 1", 8.0)]  # GPU 2 is idle


def test_the_shipped_counters_file_turns_on_every_link_field_we_read() -> None:
    fields = {line.split(",")[0].strip() for line in CSV.read_text().splitlines() if line and not line.startswith("#")}
    assert set(LINK_FIELDS) <= fields
    assert {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"} <= fields
