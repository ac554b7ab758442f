"""Attribution of GPUs to engines: the static map, processes, and kubelet pod-resources, in that
order, plus the `gpu_attribution` configuration keys. The process table and the kubelet are faked
here; tests/integration/test_gpu_attribution.py runs them for real."""

from __future__ import annotations

from types import SimpleNamespace

import psutil
import pytest

from exporter import engine_processes as processes_module
from exporter.attribution import Attributor, GpuRef, PodContainer
from exporter.attribution.podresources import PodResourcesError, _message_classes, gpu_devices
from exporter.config import ConfigError, build
from exporter.engine_processes import EngineProcess
from exporter.settings import EngineTarget, GpuAttribution

ENGINES = (
    EngineTarget(url="http://127.0.0.1:8000/metrics", name="vllm-a"),
    EngineTarget(url="http://127.0.0.1:8001/metrics", name="vllm-b"),
)
GPUS = [GpuRef(str(i), f"GPU-{i}", frozenset({100 + i}) if i in (2, 3, 4) else frozenset()) for i in range(6)]


class FakeProcesses:
    def __init__(self, result):
        self.result = result
        self.calls = 0

    def lookup(self):
        self.calls += 1
        return self.result


class FakePods:
    def __init__(self, devices=None, error=None):
        self.devices = devices or {}
        self.error = error
        self.calls = 0

    def available(self):
        return True

    def list_gpu_devices(self):
        self.calls += 1
        if self.error:
            raise PodResourcesError(self.error)
        return self.devices

    def close(self):
        pass


def attributor(settings=None, processes=None, pods=None, clock=lambda: 0.0):
    return Attributor(
        settings or GpuAttribution(pod_resources_socket=""),
        ENGINES,
        processes=processes or FakeProcesses({}),
        pod_client=pods,
        clock=clock,
    )


def engines_of(result):
    return {str(i): labels["engine"] for i, labels in enumerate(result) if "engine" in labels}


def test_static_map_by_index_and_uuid():
    settings = GpuAttribution(static={"vllm-a": ("0", "1"), "vllm-b": ("GPU-5",)}, pod_resources_socket="")
    assert engines_of(attributor(settings).attribute(GPUS)) == {"0": "vllm-a", "1": "vllm-a", "5": "vllm-b"}


def test_processes_match_the_engine_process_tree_with_gpu_pids():
    procs = FakeProcesses(
        {
            "vllm-a": EngineProcess(frozenset({10}), frozenset({10, 102, 103})),
            "vllm-b": EngineProcess(frozenset({11}), frozenset({11, 104})),
        }
    )
    assert engines_of(attributor(processes=procs).attribute(GPUS)) == {"2": "vllm-a", "3": "vllm-a", "4": "vllm-b"}


def test_static_map_wins_over_processes():
    settings = GpuAttribution(static={"vllm-b": ("2",)}, pod_resources_socket="")
    procs = FakeProcesses({"vllm-a": EngineProcess(frozenset({10}), frozenset({102, 103}))})
    assert engines_of(attributor(settings, procs).attribute(GPUS)) == {"2": "vllm-b", "3": "vllm-a"}


def test_two_engines_sharing_a_gpu_are_named_together():
    procs = FakeProcesses(
        {
            "vllm-b": EngineProcess(frozenset({1}), frozenset({102})),
            "vllm-a": EngineProcess(frozenset({2}), frozenset({102})),
        }
    )
    assert engines_of(attributor(processes=procs).attribute(GPUS))["2"] == "vllm-a,vllm-b"


def test_no_process_lookup_without_gpu_pids_or_pods():
    procs = FakeProcesses({})
    attributor(processes=procs).attribute([GpuRef("0", "GPU-0")])
    assert procs.calls == 0


def test_lookups_are_cached_for_refresh_seconds():
    now = [0.0]
    procs = FakeProcesses({})
    pods = FakePods()
    a = attributor(GpuAttribution(refresh_seconds=30.0), procs, pods, clock=lambda: now[0])
    for t in (0.0, 10.0, 29.0):
        now[0] = t
        a.attribute(GPUS)
    assert (procs.calls, pods.calls) == (1, 1)
    now[0] = 31.0
    a.attribute(GPUS)
    assert (procs.calls, pods.calls) == (2, 2)


def test_pod_resources_label_gpus_and_join_the_configured_engine_pod():
    pods = FakePods(
        {
            "GPU-0": {PodContainer("serving", "vllm-a-0", "vllm")},
            "GPU-1": {PodContainer("serving", "vllm-a-0", "vllm")},
            "GPU-5": {PodContainer("batch", "trainer-7", "main")},
        }
    )
    settings = GpuAttribution(engine_pods={"vllm-a": ("serving", "vllm-a-0")})
    result = attributor(settings, pods=pods).attribute(GPUS)
    assert result[0] == {"namespace": "serving", "pod": "vllm-a-0", "container": "vllm", "engine": "vllm-a"}
    assert result[5] == {"namespace": "batch", "pod": "trainer-7", "container": "main"}
    assert result[3] == {}


def test_engine_pod_found_from_the_hostname_of_its_process(monkeypatch):
    pods = FakePods({"nvidia4": {PodContainer("serving", "vllm-b-xyz", "vllm")}})  # device-name IDs
    procs = FakeProcesses({"vllm-b": EngineProcess(frozenset({77}), frozenset({77}))})
    monkeypatch.setattr("exporter.attribution.pod_name_of", lambda pid: "vllm-b-xyz" if pid == 77 else None)
    result = attributor(GpuAttribution(), procs, pods).attribute([GpuRef("4", "GPU-4")])
    assert result == [{"namespace": "serving", "pod": "vllm-b-xyz", "container": "vllm", "engine": "vllm-b"}]


def test_pods_reported_by_the_source_itself_are_used():
    settings = GpuAttribution(pod_resources_socket="", engine_pods={"vllm-a": ("ns", "p")})
    result = attributor(settings).attribute([GpuRef("0", "GPU-0", owners=frozenset({PodContainer("ns", "p", "c")}))])
    assert result == [{"namespace": "ns", "pod": "p", "container": "c", "engine": "vllm-a"}]


def owned(index: str, namespace: str, pod: str) -> GpuRef:
    """A GPU as dcgm-exporter reports it: pod labels, no PIDs."""
    return GpuRef(index, f"GPU-{index}", owners=frozenset({PodContainer(namespace, pod, "vllm")}))


def test_the_hostname_of_the_engine_process_joins_the_pod_the_gpu_source_names(monkeypatch):
    # No kubelet socket, no configured pods: dcgm-exporter's pod labels and the engine's own
    # process (HOSTNAME = its pod's name) are enough.
    procs = FakeProcesses(
        {
            "vllm-a": EngineProcess(frozenset({70}), frozenset({70})),
            "vllm-b": EngineProcess(frozenset({71}), frozenset({71})),
        }
    )
    monkeypatch.setattr("exporter.attribution.pod_name_of", {70: "pod-a", 71: "pod-b"}.get)
    gpus = [owned("0", "serving", "pod-a"), owned("1", "serving", "pod-b"), owned("2", "batch", "trainer")]
    result = attributor(processes=procs).attribute(gpus)
    assert engines_of(result) == {"0": "vllm-a", "1": "vllm-b"}
    assert procs.calls == 1, "GPUs with pod labels are reason enough to look the engines' processes up"


def test_one_process_serving_several_engine_targets_is_no_one_engines_pod(monkeypatch):
    # A proxy (or the simulator) listening for both targets: its HOSTNAME would name one pod for
    # both engines, so it names none.
    shared = EngineProcess(frozenset({80}), frozenset({80}))
    procs = FakeProcesses({"vllm-a": shared, "vllm-b": shared})
    monkeypatch.setattr("exporter.attribution.pod_name_of", lambda pid: "pod-a")
    result = attributor(processes=procs).attribute([owned("0", "serving", "pod-a")])
    assert result == [{"namespace": "serving", "pod": "pod-a", "container": "vllm"}]


def test_a_discovered_engine_is_tied_to_its_pods_gpus_by_its_own_labels():
    discovered = EngineTarget(
        url="http://10.0.0.7:8000/metrics",
        name="serving/pod-c",
        labels=(("pod", "pod-c"), ("namespace", "serving"), ("container", "vllm")),
    )
    a = Attributor(GpuAttribution(pod_resources_socket=""), lambda: (*ENGINES, discovered), FakeProcesses({}))
    result = a.attribute([owned("0", "serving", "pod-c"), owned("1", "other", "pod-c")])
    assert engines_of(result) == {"0": "serving/pod-c"}, "the namespace must match too"


def test_an_engine_given_by_pod_ip_is_tied_to_that_pods_gpus():
    targets = (EngineTarget(url="http://10.0.0.8:8000/metrics", name="10.0.0.8:8000"), *ENGINES)
    pods = {"10.0.0.8": ("serving", "pod-d")}
    a = Attributor(GpuAttribution(pod_resources_socket=""), targets, FakeProcesses({}), pod_at=pods.get)
    result = a.attribute([owned("0", "serving", "pod-d"), owned("1", "serving", "pod-e")])
    assert engines_of(result) == {"0": "10.0.0.8:8000"}


def test_kubelet_failure_leaves_pod_labels_out(caplog):
    result = attributor(GpuAttribution(), pods=FakePods(error="UNAVAILABLE connection refused")).attribute(GPUS)
    assert result == [{} for _ in GPUS]
    assert "pod-resources unavailable" in caplog.text


def test_gpu_devices_keeps_nvidia_resources_and_strips_sharing_suffixes():
    _, response_class = _message_classes()
    response = response_class()
    pod = response.pod_resources.add(name="p", namespace="ns")
    container = pod.containers.add(name="c")
    container.devices.add(resource_name="nvidia.com/gpu", device_ids=["GPU-1", "GPU-2::3"])
    container.devices.add(resource_name="nvidia.com/mig-1g.10gb", device_ids=["MIG-9"])
    container.devices.add(resource_name="example.com/fpga", device_ids=["fpga0"])
    owner = PodContainer("ns", "p", "c")
    assert gpu_devices(response) == {"GPU-1": {owner}, "GPU-2": {owner}, "MIG-9": {owner}}


# -- process lookups ----------------------------------------------------------------------------


def conn(ip, port, pid, status=psutil.CONN_LISTEN):
    return SimpleNamespace(laddr=SimpleNamespace(ip=ip, port=port), pid=pid, status=status)


@pytest.mark.parametrize(
    "listen_ip, engine_ips, expected",
    [
        ("0.0.0.0", {"10.0.0.5"}, True),
        ("::", {"127.0.0.1"}, True),
        ("10.0.0.5", {"10.0.0.5"}, True),
        ("127.0.0.1", {"127.0.0.1"}, True),
        ("127.0.0.1", {"::1"}, True),
        ("::ffff:10.0.0.5", {"10.0.0.5"}, True),
        ("127.0.0.1", {"10.0.0.5"}, False),
        ("10.0.0.6", {"10.0.0.5"}, False),
    ],
)
def test_listener_matches(listen_ip, engine_ips, expected):
    assert processes_module.listener_matches(listen_ip, engine_ips) is expected


def test_listening_pids_only_listeners_on_the_port():
    connections = [
        conn("0.0.0.0", 8000, 10),
        conn("127.0.0.1", 8000, 11, status=psutil.CONN_ESTABLISHED),
        conn("0.0.0.0", 8001, 12),
        conn("0.0.0.0", 8000, None),
    ]
    assert processes_module.listening_pids(connections, 8000, {"127.0.0.1"}) == {10}


def test_remote_engines_are_not_looked_up(monkeypatch):
    monkeypatch.setattr(processes_module.psutil, "net_connections", lambda kind: pytest.fail("looked up"))
    lookup = processes_module.EngineProcesses([EngineTarget(url="http://192.0.2.7:8000/metrics", name="far")])
    assert lookup.lookup() == {}


# -- configuration -------------------------------------------------------------------------------

ENGINES_CONFIG = {"engines": [{"url": "http://127.0.0.1:8000/metrics", "name": "vllm-a"}]}


def test_defaults():
    config = build(ENGINES_CONFIG)
    assert config.gpu_attribution == GpuAttribution()
    assert config.gpu_attribution.pod_resources_socket == "/var/lib/kubelet/pod-resources/kubelet.sock"
    assert config.gpu.dcgm_address == "localhost:5555"


def test_full_attribution_config():
    config = build(
        {
            **ENGINES_CONFIG,
            "dcgm_address": "embedded",
            "gpu_attribution": {
                "static": {"vllm-a": [0, "1", "GPU-abc"]},
                "processes": False,
                "pod_resources_socket": "",
                "engine_pods": {"vllm-a": "serving/vllm-a-0"},
                "refresh_seconds": 10,
            },
        }
    )
    assert config.gpu_attribution == GpuAttribution(
        static={"vllm-a": ("0", "1", "GPU-abc")},
        processes=False,
        pod_resources_socket="",
        engine_pods={"vllm-a": ("serving", "vllm-a-0")},
        refresh_seconds=10.0,
    )
    assert config.gpu.dcgm_address == "embedded"


@pytest.mark.parametrize(
    "value, where",
    [
        ({"colour": 1}, "gpu_attribution.colour"),
        ({"static": {"nobody": [0]}}, "gpu_attribution.static.nobody"),
        ({"static": {"vllm-a": ["zero"]}}, "gpu_attribution.static.vllm-a"),
        ({"static": {"vllm-a": [-1]}}, "gpu_attribution.static.vllm-a"),
        ({"static": [0]}, "gpu_attribution.static"),
        ({"processes": "yes"}, "gpu_attribution.processes"),
        ({"pod_resources_socket": 5}, "gpu_attribution.pod_resources_socket"),
        ({"engine_pods": {"vllm-a": "no-namespace"}}, "gpu_attribution.engine_pods.vllm-a"),
        ({"engine_pods": {"other": "ns/p"}}, "gpu_attribution.engine_pods.other"),
        ({"refresh_seconds": 0}, "gpu_attribution.refresh_seconds"),
        ("static", "gpu_attribution"),
    ],
)
def test_bad_attribution_config_names_the_key(value, where):
    with pytest.raises(ConfigError) as raised:
        build({**ENGINES_CONFIG, "gpu_attribution": value})
    assert raised.value.where == where


def test_bad_dcgm_address_names_the_key():
    with pytest.raises(ConfigError) as raised:
        build({"dcgm_address": ""})
    assert raised.value.where == "dcgm_address"


def test_gpu_devices_keeps_amd_ascend_and_gaudi_resources():
    _, response_class = _message_classes()
    response = response_class()
    container = response.pod_resources.add(name="p", namespace="ns").containers.add(name="c")
    # The device plugins' IDs: AMD's are PCI addresses, Huawei's AscendNNN-N, Intel's the device name.
    container.devices.add(resource_name="amd.com/gpu", device_ids=["0000:0c:00.0"])
    container.devices.add(resource_name="huawei.com/Ascend910", device_ids=["Ascend910-3"])
    container.devices.add(resource_name="habana.ai/gaudi", device_ids=["hl1"])
    owner = PodContainer("ns", "p", "c")
    assert gpu_devices(response) == {"0000:0c:00.0": {owner}, "Ascend910-3": {owner}, "hl1": {owner}}


def test_an_amd_gpu_is_found_in_pod_resources_by_its_pci_address():
    pods = FakePods({"0000:0c:00.0": {PodContainer("serving", "vllm-a-0", "vllm")}})
    settings = GpuAttribution(engine_pods={"vllm-a": ("serving", "vllm-a-0")})
    ref = GpuRef("0", "00ff74a1-0000-1000-80b7-9a0c1d5e8000", device_ids=("0000:0c:00.0",))
    assert attributor(settings, pods=pods).attribute([ref]) == [
        {"namespace": "serving", "pod": "vllm-a-0", "container": "vllm", "engine": "vllm-a"}
    ]
