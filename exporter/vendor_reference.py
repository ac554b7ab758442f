"""The "GPUs by vendor" part of docs/metrics.md, written from the vendor exporters' specs so the
documented mapping is the one the code applies (exporter.reference places it)."""

from __future__ import annotations

from exporter.catalogue import CATALOGUE
from exporter.sources.device_exporter import DeviceExporterSpec
from exporter.sources.gpu import GPU_MODES
from exporter.sources.gpu_common import MIB, PERCENT, Scale

# What `--gpu amdsmi` reads, by family (exporter/sources/amd_smi.py).
AMDSMI_FIELDS = (
    ("llm_gpu_utilization_ratio", "`amdsmi_get_gpu_activity()` `gfx_activity`", "percent → ratio"),
    ("llm_gpu_dram_active_ratio", "`amdsmi_get_gpu_activity()` `umc_activity`", "percent → ratio"),
    ("llm_gpu_memory_used_bytes", "`amdsmi_get_gpu_vram_usage()` `vram_used`", "MB × 2^20"),
    ("llm_gpu_memory_total_bytes", "`amdsmi_get_gpu_vram_usage()` `vram_total`", "MB × 2^20"),
    ("llm_gpu_power_watts", "`amdsmi_get_power_info()` `current_socket_power` (else `average_socket_power`)", "W"),
    ("llm_gpu_temperature_celsius", "`amdsmi_get_temp_metric(HOTSPOT, CURRENT)`", "°C"),
    ("llm_gpu_ecc_errors_total", "`amdsmi_get_gpu_total_ecc_count()` (`severity`)", "count"),
)


def _scale(scale: Scale) -> str:
    if scale == PERCENT:
        return "percent → ratio"
    if scale == MIB:
        return "MB × 2^20"
    if scale == 1024.0:
        return "KB × 1024"
    if scale == 1e-3:
        return "mW → W"
    if scale == 1e6:
        return "MHz → Hz"
    return "as is"


def _absent(families: set[str]) -> str:
    gpu = [name for name in CATALOGUE if name.startswith("llm_gpu_") and name != "llm_gpu_up"]
    return ", ".join(f"`{name}`" for name in gpu if name not in families)


def _spec_lines(title: str, spec: DeviceExporterSpec) -> list[str]:
    lines = ["", f"### {title}", "", f'`vendor="{spec.vendor}"`. Device labels: `gpu` from ']
    lines[-1] += ", ".join(f"`{n}`" for n in spec.index_labels)
    if spec.uuid_labels:
        lines[-1] += "; `uuid` from " + ", ".join(f"`{n}`" for n in spec.uuid_labels)
    if spec.model_labels:
        lines[-1] += "; `gpu_model` from " + ", ".join(f"`{n}`" for n in spec.model_labels)
    for wire, ours in spec.id_labels.items():
        lines[-1] += f"; `{ours}` from `{wire}`"
    pods = [f"`{names[0]}`" for names in spec.pod_labels if names]
    if pods:
        lines[-1] += "; the pod from " + "/".join(pods)
    lines[-1] += " (first non-empty wins)."
    if spec.failed_values:
        shown = ", ".join(f"{v:g}" for v in sorted(spec.failed_values))
        lines[-1] += f' A sample of {shown} is the exporter\'s "could not read" and is dropped.'
    if spec.device_id_labels:
        lines[-1] += " The device plugin's device ID, looked up in the kubelet's pod-resources answer, is "
        lines[-1] += ", ".join(f"`{n}`" for n in spec.device_id_labels) + "."
    lines += ["", "| family | wire name | unit |", "|---|---|---|"]
    families: set[str] = set()
    for wire, (family, scale) in spec.metrics.items():
        families.add(family)
        lines.append(f"| `{family}` | `{wire}` | {_scale(scale)} |")
    for wire, labelled in spec.labelled.items():
        families.add(labelled.family)
        own = ", ".join(f'{k}="{v}"' for k, v in labelled.labels)
        unit = _scale(labelled.scale)
        lines.append(f"| `{labelled.family}{{{own}}}` | `{wire}` (summed over the device's series) | {unit} |")
    for wire in spec.health:
        families.add("llm_gpu_healthy")
        lines.append(f"| `llm_gpu_healthy` | `{wire}` | 1 healthy, else 0 |")
    lines += ["", f"Absent (the exporter has no such signal): {_absent(families)}."]
    return lines


def vendor_reference() -> list[str]:
    lines = [
        "",
        "## GPUs by vendor",
        "",
        "Every source fills the same `llm_gpu_*` families; `vendor` says whose device it is (`nvidia` for",
        "NVML, DCGM and dcgm-exporter). A family a vendor does not measure is absent, never derived. Where",
        "several wire names feed one family the first one present wins, in the order listed.",
        "",
        "### AMD SMI (`--gpu amdsmi`)",
        "",
        '`vendor="amd"`. Device labels: `gpu` (handle order), `uuid`, `gpu_model` (ASIC market name),',
        "`pci_bus_id`, `compute_partition`, `memory_partition` (lower-cased: `spx`, `nps1`).",
        "",
        "| family | call | unit |",
        "|---|---|---|",
        *(f"| `{family}` | {call} | {unit} |" for family, call, unit in AMDSMI_FIELDS),
        "",
        f"Absent: {_absent({f for f, _, _ in AMDSMI_FIELDS})}.",
    ]
    for name in GPU_MODES.names():  # each vendor exporter registered with its spec
        mode = GPU_MODES[name]
        if mode.spec is not None:
            lines += _spec_lines(f"{mode.title} (`--gpu {mode.usage}`)", mode.spec)
    return lines
