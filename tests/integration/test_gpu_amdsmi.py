"""The AMD SMI source end to end: the real `once` command and the real `amdsmi` binding (PyPI 6.2.4)
over the stand-in libamd_smi.so built from AMD's amdsmi.h (tests/amdsmi_stub), found through
$ROCM_PATH as on a ROCm node."""

from __future__ import annotations

import pytest

from tests import amdsmi_stub
from tests.amdsmi_stub import child_env, mi300x, write_state
from tests.integration.gpu_helpers import PATIENT_ENGINES, EngineProcess, labels_of, run_once, series, values_by

pytestmark = pytest.mark.integration

MIB = 2**20
NO_KUBELET = PATIENT_ENGINES + "gpu_attribution:\n  pod_resources_socket: ''\n"


@pytest.fixture(scope="module")
def rocm_path():
    try:
        return amdsmi_stub.build_stub()
    except amdsmi_stub.StubUnavailable as exc:
        pytest.fail(f"the AMD SMI stand-in cannot be built (scripts/test installs gcc): {exc}")


def test_every_value_in_our_units_and_a_lost_gpu_is_down(tmp_path, rocm_path):
    state = tmp_path / "amdsmi-state"
    gpus = [mi300x(0), mi300x(1), mi300x(2, lost=True), mi300x(3)]
    del gpus[3]["umc_activity"]  # this GPU's firmware has no UMC activity: the library answers 0xFFFF
    write_state(state, gpus)
    found = series(run_once("--gpu", "amdsmi", env=child_env(rocm_path, state)).stdout)
    # The state's own numbers, converted by hand: percent / 100, MB × 2^20, W, °C.
    assert values_by(found, "llm_gpu_up") == {"0": 1.0, "1": 1.0, "2": 0.0, "3": 1.0}
    assert values_by(found, "llm_gpu_utilization_ratio") == {"0": 0.35, "1": 0.36, "3": 0.38}
    assert values_by(found, "llm_gpu_dram_active_ratio") == {"0": 0.88, "1": 0.87}
    assert values_by(found, "llm_gpu_memory_used_bytes") == {"0": 180000 * MIB, "1": 180001 * MIB, "3": 180003 * MIB}
    assert values_by(found, "llm_gpu_memory_total_bytes")["1"] == 196592 * MIB
    assert values_by(found, "llm_gpu_power_watts") == {"0": 620.0, "1": 621.0, "3": 623.0}
    assert values_by(found, "llm_gpu_temperature_celsius") == {"0": 71.0, "1": 72.0, "3": 74.0}
    ecc = {(dict(k)["gpu"], dict(k)["severity"]): v for (n, k), v in found.items() if n == "llm_gpu_ecc_errors_total"}
    assert ecc[("1", "correctable")] == 3.0 and ecc[("1", "uncorrectable")] == 0.0
    assert {labels.get("severity") for labels in labels_of(found, "1")} == {None, "correctable", "uncorrectable"}
    assert [labels for labels in labels_of(found, "1") if "severity" not in labels][0] == {
        "gpu": "1",
        "vendor": "amd",
        "uuid": "01ff74a1-0000-1000-80b7-9a0c1d5e8001",
        "gpu_model": "AMD Instinct MI300X",
        "pci_bus_id": "0000:1c:00.0",
        "compute_partition": "spx",
        "memory_partition": "nps1",
    }
    assert {"gpu": "2", "vendor": "amd"} in labels_of(found, "2")  # down: no stale values


def test_a_library_that_cannot_start_marks_the_source_down(tmp_path, rocm_path):
    state = tmp_path / "amdsmi-state"
    write_state(state, [mi300x(0)], init_error=True)
    out = run_once("--gpu", "amdsmi", env=child_env(rocm_path, state)).stdout
    assert 'llm_exporter_source_up{source="amdsmi",target=""} 0.0' in out
    assert 'reason="unavailable",source="amdsmi"' in out and "llm_gpu_up" not in out


def test_auto_finds_the_amd_gpus_and_attributes_them_by_process(tmp_path, rocm_path):
    engine = EngineProcess(tmp_path)
    try:
        state = tmp_path / "amdsmi-state"
        write_state(state, [mi300x(0), mi300x(1, pids=[engine.worker_pid, 1])])
        config = tmp_path / "config.yaml"
        config.write_text(NO_KUBELET)
        result = run_once("--config", str(config), "--engine", f"vllm={engine.url}", env=child_env(rocm_path, state))
        assert "auto chose AMD SMI" in result.stderr
        found = series(result.stdout)
        name = f"127.0.0.1:{engine.port}"
        assert all(labels.get("engine") == name for labels in labels_of(found, "1"))
        assert all("engine" not in labels for labels in labels_of(found, "0"))
    finally:
        engine.close()
