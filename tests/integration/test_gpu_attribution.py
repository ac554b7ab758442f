"""GPU → engine attribution with real processes and a real kubelet pod-resources gRPC server.

The engine stand-in is a real process listening on the engine port whose child plays the GPU
worker (as vLLM's EngineCore is the API server's child); the NVML stand-in reports that child's PID
on GPUs 2 and 3. The pod-resources server is generated at test time with grpc_tools from
tests/fixtures/podresources/api.proto (the kubelet v1 API) and listens on a Unix socket.
"""

from __future__ import annotations

import pytest

from exporter.attribution import PodContainer
from exporter.attribution.podresources import PodResourcesClient, PodResourcesError
from tests.integration.gpu_helpers import (
    PATIENT_ENGINES,
    EngineProcess,
    KubeletPodResources,
    labels_of,
    run_once,
    series,
    stub_dir,
)
from tests.nvml_stub import child_env, eight_gpu_node, with_changes, write_state
from tests.support import FIXTURES, RouteServer, respond_with

pytestmark = pytest.mark.integration

NO_KUBELET = PATIENT_ENGINES + "gpu_attribution:\n  pod_resources_socket: ''\n"


@pytest.fixture
def engine(tmp_path):
    process = EngineProcess(tmp_path)
    yield process
    process.close()


def gpus_with(found, **labels):
    return {
        dict(key)["gpu"]
        for (_, key) in found
        if "gpu" in dict(key) and all(dict(key).get(k) == v for k, v in labels.items())
    }


def test_engine_process_tree_gets_exactly_its_gpus(tmp_path, engine):
    state = tmp_path / "nvml-state"
    write_state(
        state,
        with_changes(
            eight_gpu_node(), gpu2={"compute_pids": [engine.worker_pid]}, gpu3={"compute_pids": [engine.worker_pid, 1]}
        ),
    )
    config = tmp_path / "config.yaml"
    config.write_text(NO_KUBELET)
    out = run_once(
        "--config", str(config), "--gpu", "nvml", "--engine", f"vllm={engine.url}", env=child_env(stub_dir(), state)
    ).stdout
    found = series(out)
    name = f"127.0.0.1:{engine.port}"
    assert gpus_with(found, engine=name) == {"2", "3"}
    # Every series of those GPUs carries it, and no other GPU's series does.
    for gpu in ("2", "3"):
        assert all(labels.get("engine") == name for labels in labels_of(found, gpu))
    assert all("engine" not in labels for gpu in "014567" for labels in labels_of(found, gpu))
    assert f'llm_engine_up{{engine="{name}"' in out  # the engine itself was scraped too


def test_static_map_names_the_engine_without_processes(tmp_path, engine):
    # The engine answers (`once` fails when no configured engine does), but no GPU lists its PIDs.
    state = tmp_path / "nvml-state"
    write_state(state, eight_gpu_node())
    config = tmp_path / "config.yaml"
    config.write_text(
        PATIENT_ENGINES + f"engines:\n  - url: {engine.url}\n    name: vllm-static\n"
        "gpu_attribution:\n  pod_resources_socket: ''\n  processes: false\n"
        "  static:\n    vllm-static: [0, GPU-00000001-5e1f-4c1a-9d2b-0000a0000001]\n"
    )
    found = series(run_once("--config", str(config), "--gpu", "nvml", env=child_env(stub_dir(), state)).stdout)
    assert gpus_with(found, engine="vllm-static") == {"0", "1"}


@pytest.fixture
def kubelet(tmp_path):
    node = eight_gpu_node()
    server = KubeletPodResources(
        tmp_path,
        [
            ("serving", "vllm-b-0", "vllm", "nvidia.com/gpu", [node["gpus"][6]["uuid"], node["gpus"][7]["uuid"]]),
            ("batch", "trainer", "main", "nvidia.com/gpu", [node["gpus"][5]["uuid"] + "::1"]),
            ("kube-system", "sriov", "agent", "intel.com/sriov", ["0000:3b:00.1"]),
        ],
    )
    yield server
    server.close()


def test_pod_resources_client_reads_a_real_kubelet_server(kubelet):
    client = PodResourcesClient(kubelet.socket_path)
    try:
        devices = client.list_gpu_devices()
    finally:
        client.close()
    node = eight_gpu_node()["gpus"]
    assert devices == {
        node[6]["uuid"]: {PodContainer("serving", "vllm-b-0", "vllm")},
        node[7]["uuid"]: {PodContainer("serving", "vllm-b-0", "vllm")},
        node[5]["uuid"]: {PodContainer("batch", "trainer", "main")},
    }


def test_pod_resources_client_reports_a_dead_socket(tmp_path):
    client = PodResourcesClient(str(tmp_path / "absent.sock"), timeout_seconds=1.0)
    assert not client.available()
    with pytest.raises(PodResourcesError):
        client.list_gpu_devices()
    client.close()


def test_kubelet_pods_label_gpus_and_join_the_configured_engine(tmp_path, kubelet, engine):
    state = tmp_path / "nvml-state"
    write_state(state, eight_gpu_node())  # no PIDs on the GPUs: the configured pod alone names them
    config = tmp_path / "config.yaml"
    config.write_text(
        PATIENT_ENGINES + f"engines:\n  - url: {engine.url}\n    name: vllm-b\n"
        f"gpu_attribution:\n  pod_resources_socket: {kubelet.socket_path}\n"
        "  engine_pods:\n    vllm-b: serving/vllm-b-0\n"
    )
    result = run_once("--config", str(config), "--gpu", "nvml", env=child_env(stub_dir(), state))
    found = series(result.stdout)
    labelled = gpus_with(found, engine="vllm-b", pod="vllm-b-0", namespace="serving", container="vllm")
    assert labelled == {"6", "7"}, result.stderr[-3000:]
    assert gpus_with(found, pod="trainer", namespace="batch") == {"5"}
    assert gpus_with(found, engine="vllm-b") == {"6", "7"}
    assert kubelet.calls == 1


def test_engine_pod_is_found_from_its_process_hostname(tmp_path, kubelet):
    engine = EngineProcess(tmp_path, hostname="vllm-b-0")
    try:
        state = tmp_path / "nvml-state"
        write_state(state, eight_gpu_node())  # no PIDs on the GPUs: only the kubelet knows
        config = tmp_path / "config.yaml"
        config.write_text(
            PATIENT_ENGINES + f"engines:\n  - url: {engine.url}\n    name: vllm-b\n"
            f"gpu_attribution:\n  pod_resources_socket: {kubelet.socket_path}\n"
        )
        found = series(run_once("--config", str(config), "--gpu", "nvml", env=child_env(stub_dir(), state)).stdout)
    finally:
        engine.close()
    assert gpus_with(found, engine="vllm-b") == {"6", "7"}


def test_plain_flags_tie_an_engine_to_the_pod_dcgm_exporter_names_by_its_process_hostname(tmp_path):
    """`--engine vllm=URL --gpu dcgm-exporter=URL` and nothing else: no kubelet socket, no
    engine_pods. dcgm-exporter's capture puts GPU 0 in a pod; the engine whose listening process
    has that pod's HOSTNAME (as Kubernetes sets it) gets GPU 0, the engine in another pod none."""
    pod = "runai-reservation-gpu-qa-mig-worker-gpu-1-kvltw"  # the capture's pod label on GPU 0
    capture = (FIXTURES / "dcgm-exporter" / "dcgm-exporter-t4-pods-runai-1-workload.prom").read_text(encoding="utf-8")
    server = RouteServer({"/metrics": respond_with(capture)})
    engine = EngineProcess(tmp_path, hostname=pod)
    other = EngineProcess(tmp_path, hostname="sglang-0")
    try:
        config = tmp_path / "config.yaml"
        config.write_text(NO_KUBELET)
        out = run_once(
            "--config",
            str(config),
            "--engine",
            f"vllm={engine.url}",
            "--engine",
            f"vllm={other.url}",
            "--gpu",
            f"dcgm-exporter={server.url('/metrics')}",
        ).stdout
    finally:
        for process in (engine, other):
            process.close()
        server.close()
    found = series(out)
    name = f"127.0.0.1:{engine.port}"
    assert gpus_with(found, engine=name, pod=pod, namespace="runai-reservation") == {"0"}
    assert all(labels.get("engine") == name for labels in labels_of(found, "0"))
    assert all("engine" not in labels for labels in labels_of(found, "1"))
    assert gpus_with(found, engine=f"127.0.0.1:{other.port}") == set()
