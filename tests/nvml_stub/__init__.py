"""Build and drive the NVML stand-in (`nvml_stub.c`) for tests on machines without a GPU.

`build_stub()` compiles the C file with gcc against the real `nvml.h` from the `nvidia-nvml-dev`
wheel into `.cache/nvml-stub/<hash>/libnvidia-ml.so.1` (soname `libnvidia-ml.so.1`), once per
source/header content. Put that directory first on `LD_LIBRARY_PATH` of a child process, or
preload it in this process with `preload()`: the dynamic loader then hands the same library to
nvidia-ml-py's `CDLL("libnvidia-ml.so.1")`, because it matches by soname.

`write_state()` writes the flat key=value state the library answers from (see the C file's
header); it replaces the file atomically so the library never reads half a state.
"""

from __future__ import annotations

import copy
import ctypes
import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.stub_library import compile_shared_library

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SOURCE = HERE / "nvml_stub.c"
CACHE = REPO / ".cache" / "nvml-stub"
SONAME = "libnvidia-ml.so.1"

# Hopper GPM metric IDs (nvml.h NVML_GPM_METRIC_*) and the values the default node reports.
GPM_SM_UTIL, GPM_SM_OCCUPANCY, GPM_ANY_TENSOR_UTIL, GPM_DRAM_BW_UTIL = 2, 3, 5, 10
GPM_PCIE_TX_PER_SEC, GPM_PCIE_RX_PER_SEC = 20, 21
GPM_NVLINK_TOTAL_RX_PER_SEC, GPM_NVLINK_TOTAL_TX_PER_SEC = 60, 61


class StubUnavailable(RuntimeError):
    """gcc or the nvidia-nvml-dev header is missing."""


def find_nvml_header() -> Path:
    """nvml.h from the installed `nvidia-nvml-dev` distribution."""
    try:
        files = metadata.files("nvidia-nvml-dev") or []
    except metadata.PackageNotFoundError as exc:
        raise StubUnavailable("the nvidia-nvml-dev package is not installed (pip install nvidia-nvml-dev)") from exc
    for entry in files:
        if entry.name == "nvml.h":
            return Path(entry.locate()).resolve()
    raise StubUnavailable("nvidia-nvml-dev is installed but ships no nvml.h")


def build_stub(cache_dir: Path = CACHE) -> Path:
    """Compile the stub if needed; return the directory holding `libnvidia-ml.so.1`."""
    header = find_nvml_header()
    gcc = shutil.which("gcc")
    if gcc is None:
        raise StubUnavailable("gcc is not installed")
    digest = hashlib.sha256(SOURCE.read_bytes() + header.read_bytes()).hexdigest()[:16]
    out_dir = cache_dir / digest
    library = out_dir / SONAME
    if library.exists():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    compile_shared_library(
        gcc,
        library,
        [SOURCE],
        header.parent,
        SONAME,
        "NVML stub",
        extra_flags=["-Wno-deprecated-declarations"],
        libraries=["-lpthread"],
    )
    return out_dir


def preload(lib_dir: Path) -> ctypes.CDLL:
    """Load the stub into this process so nvidia-ml-py's dlopen by soname finds it."""
    return ctypes.CDLL(str(lib_dir / SONAME), mode=ctypes.RTLD_GLOBAL)


def child_env(lib_dir: Path, state_path: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(lib_dir), env.get("LD_LIBRARY_PATH", "")) if p)
    env["NVML_STUB_STATE"] = str(state_path)
    return env


def render_state(state: Mapping[str, Any]) -> str:
    """{"gpus": [{...}], "xid_events": [(gpu, xid)], "init_error": n} as key=value lines."""
    lines = [f"device_count={len(state['gpus'])}"]
    for index, gpu in enumerate(state["gpus"]):
        for key, value in gpu.items():
            if key == "gpm_metrics":
                lines += [f"gpu.{index}.gpm.{metric}={metric_value!r}" for metric, metric_value in value.items()]
            elif key == "errors":
                lines += [f"gpu.{index}.error.{function}={code}" for function, code in value.items()]
            elif isinstance(value, (list, tuple, set, frozenset)):
                lines.append(f"gpu.{index}.{key}={','.join(str(v) for v in value)}")
            elif isinstance(value, bool):
                lines.append(f"gpu.{index}.{key}={int(value)}")
            else:
                lines.append(f"gpu.{index}.{key}={value}")
    if state.get("xid_events"):
        lines.append("xid_events=" + ",".join(f"{gpu}:{xid}" for gpu, xid in state["xid_events"]))
    if state.get("init_error") is not None:
        lines.append(f"init_error={state['init_error']}")
    return "\n".join(lines) + "\n"


def write_state(path: Path, state: Mapping[str, Any]) -> None:
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=".nvml-state-")
    with os.fdopen(fd, "w") as handle:
        handle.write(render_state(state))
    os.replace(partial, path)


GIB = 1 << 30


def _gpu(index: int, name: str, gpm: bool, memory_gib: int) -> dict[str, Any]:
    gpu: dict[str, Any] = {
        "name": name,
        "uuid": f"GPU-{index:08x}-5e1f-4c1a-9d2b-{0xA0000000 + index:012x}",
        "memory_total": memory_gib * GIB,
        "memory_reserved": 512 * (1 << 20),
        "memory_used": (10 + index) * GIB,
        "memory_free": memory_gib * GIB - (10 + index) * GIB - 512 * (1 << 20),
        "utilization_gpu": 50 + index,
        "utilization_memory": 20 + index,
        "power_mw": 300_000 + 1_000 * index,
        "temperature_c": 40 + index,
        "sm_clock_mhz": 1_410 + index,
        "mem_clock_mhz": 2_619,
        "pcie_tx_bytes": 1_000_000 * (index + 1),
        "pcie_rx_bytes": 2_000_000 * (index + 1),
        "nvlink_tx_kib": 3_000 * (index + 1),
        "nvlink_rx_kib": 4_000 * (index + 1),
        "clocks_event_reasons": 0x1 if index % 2 else 0x4,
        "gpm": gpm,
    }
    if gpm:
        gpu["gpm_metrics"] = {
            GPM_SM_UTIL: 45.0 + index,
            GPM_SM_OCCUPANCY: 30.0 + index,
            GPM_ANY_TENSOR_UTIL: 12.5 + index,
            GPM_DRAM_BW_UTIL: 95.0 - index,
            GPM_PCIE_TX_PER_SEC: 100.0,
            GPM_PCIE_RX_PER_SEC: 200.0,
            GPM_NVLINK_TOTAL_RX_PER_SEC: 1024.0 + index,
            GPM_NVLINK_TOTAL_TX_PER_SEC: 2048.0 + index,
        }
    return gpu


def eight_gpu_node() -> dict[str, Any]:
    """GPUs 0-1 H100, 2-3 H200 (GPM supported), 4-7 A100 (GPM not supported)."""
    names = ["NVIDIA H100 80GB HBM3"] * 2 + ["NVIDIA H200"] * 2 + ["NVIDIA A100-SXM4-80GB"] * 4
    memory = [80, 80, 141, 141, 80, 80, 80, 80]
    return {"gpus": [_gpu(i, names[i], i < 4, memory[i]) for i in range(8)], "xid_events": []}


#: a GPU's PCIe link trained as far as it and its slot allow (Gen5 x16)
HEALTHY_LINK = {"pcie_gen": 5, "pcie_width": 16, "pcie_max_gen": 5, "pcie_max_width": 16, "pcie_gpu_max_gen": 5}


def with_links(state: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `state` whose GPUs report healthy links: PCIe Gen5 x16 and 18 NVLink links up."""
    result = copy.deepcopy(dict(state))
    for gpu in result["gpus"]:
        gpu.update(HEALTHY_LINK, pcie_replay=3, nvlink_states=[1] * 18, fabric_health_mask=2)
    return result


def with_changes(state: Mapping[str, Any], **gpu_changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `state` with `gpu5={"lost": True}`-style per-GPU changes."""
    result = copy.deepcopy(dict(state))
    for key, changes in gpu_changes.items():
        result["gpus"][int(key.removeprefix("gpu"))].update(changes)
    return result
