"""Pod annotations to engine targets, the dynamic source set, and the loop asking it each round."""

from __future__ import annotations

import copy
import logging
from types import SimpleNamespace

import pytest

from exporter.catalogue import CATALOGUE
from exporter.config import ConfigError, build
from exporter.discovery.kubernetes import DiscoveryStatus, candidate_for, pod_ips, target_for_pod
from exporter.discovery.targets import Candidate, DynamicEngineSources
from exporter.loop import CollectionLoop
from exporter.model import Sample
from exporter.settings import EngineTarget, KubernetesSettings, ScrapeLimits
from exporter.sources.base import Source, SourceError

NODE = "gpu-node-1"
SETTINGS = KubernetesSettings(enabled=True, limits=ScrapeLimits(timeout_seconds=1.5))
POD = {
    "metadata": {
        "name": "llama-8b-vllm-7d9f8c6b5d-x2k4q",
        "namespace": "inference",
        "annotations": {
            "llm-bottleneck-exporter/scrape": "true",
            "llm-bottleneck-exporter/port": "8000",
            "llm-bottleneck-exporter/type": "vllm",
        },
    },
    "spec": {
        "nodeName": NODE,
        "containers": [
            {"name": "vllm", "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]},
            {"name": "log-shipper", "ports": [{"name": "metrics", "containerPort": 2020, "protocol": "TCP"}]},
        ],
    },
    "status": {"phase": "Running", "podIP": "10.244.3.17"},
}


def pod_with(annotations: dict | None = None, **changes: object) -> dict:
    pod = copy.deepcopy(POD)
    pod["metadata"]["annotations"].update(annotations or {})
    for path, value in changes.items():
        section, key = path.split("__")
        pod[section][key] = value
    return pod


def test_annotated_running_pod_becomes_a_target_at_its_own_ip_with_pod_labels():
    target, reason = target_for_pod(POD, NODE, SETTINGS)
    assert reason == ""
    assert target == EngineTarget(
        url="http://10.244.3.17:8000/metrics",
        name="inference/llama-8b-vllm-7d9f8c6b5d-x2k4q",
        type="vllm",
        limits=ScrapeLimits(timeout_seconds=1.5),
        labels=(("pod", "llama-8b-vllm-7d9f8c6b5d-x2k4q"), ("namespace", "inference"), ("container", "vllm")),
        follow_redirects=False,
    )


def test_container_label_is_the_container_declaring_the_port():
    target, _ = target_for_pod(pod_with({"llm-bottleneck-exporter/port": "2020"}), NODE, SETTINGS)
    assert dict(target.labels)["container"] == "log-shipper"


def test_path_annotation_and_ipv6_pod_ip():
    pod = pod_with({"llm-bottleneck-exporter/path": "/prometheus/metrics"}, status__podIP="fd00:10:244::3a")
    target, _ = target_for_pod(pod, NODE, SETTINGS)
    assert target.url == "http://[fd00:10:244::3a]:8000/prometheus/metrics"


def test_without_a_port_annotation_the_only_declared_port_is_used():
    pod = pod_with()
    del pod["metadata"]["annotations"]["llm-bottleneck-exporter/port"]
    pod["spec"]["containers"] = pod["spec"]["containers"][:1]
    assert target_for_pod(pod, NODE, SETTINGS)[0].url == "http://10.244.3.17:8000/metrics"
    pod["spec"]["containers"] = POD["spec"]["containers"]  # two declared ports: ambiguous
    target, reason = target_for_pod(pod, NODE, SETTINGS)
    assert target is None and "2 declared container ports" in reason


@pytest.mark.parametrize("port", ["8000@10.0.0.1", "0", "65536", "8000/", " 8000", "-1", "80a", "", "１２３"])
def test_port_annotation_that_is_not_a_port_number_is_refused(port):
    target, reason = target_for_pod(pod_with({"llm-bottleneck-exporter/port": port}), NODE, SETTINGS)
    assert target is None and "is not a port number" in reason


@pytest.mark.parametrize(
    "path",
    [
        "@10.0.0.1:80/metrics",
        "//10.0.0.1/metrics",
        "http://10.0.0.1/metrics",
        "metrics",
        "/metrics?target=10.0.0.1",
        "/metrics#x",
        "/a b",
        "/\\10.0.0.1/metrics",
        "/metrics@10.0.0.1",
        "/x\n",
        "",
    ],
)
def test_path_annotation_that_could_name_a_host_is_refused(path):
    target, reason = target_for_pod(pod_with({"llm-bottleneck-exporter/path": path}), NODE, SETTINGS)
    assert target is None and "is not a plain absolute path" in reason


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"spec__nodeName": "gpu-node-2"}, "scheduled on node 'gpu-node-2'"),
        ({"status__phase": "Pending"}, "phase is 'Pending'"),
        ({"status__phase": "Succeeded"}, "phase is 'Succeeded'"),
        ({"status__podIP": None}, "no valid pod IP"),
        ({"status__podIP": "evil.example.com"}, "no valid pod IP"),
    ],
)
def test_only_running_pods_on_this_node_with_an_ip_are_targets(change, reason):
    target, why = target_for_pod(pod_with(**change), NODE, SETTINGS)
    assert target is None and reason in why


def test_pods_without_the_scrape_annotation_are_ignored_quietly():
    for value in (None, "True", "false", "yes"):
        pod = pod_with()
        if value is None:
            del pod["metadata"]["annotations"]["llm-bottleneck-exporter/scrape"]
        else:
            pod["metadata"]["annotations"]["llm-bottleneck-exporter/scrape"] = value
        assert target_for_pod(pod, NODE, SETTINGS) == (None, "")


def test_unknown_engine_type_is_refused():
    target, reason = target_for_pod(pod_with({"llm-bottleneck-exporter/type": "ollama"}), NODE, SETTINGS)
    assert target is None and "'ollama' is not one of" in reason


def test_pod_ips_name_each_running_pod_of_this_node_by_its_own_ip():
    other = pod_with(status__podIP="10.244.3.18", status__podIPs=[{"ip": "10.244.3.18"}, {"ip": "fd00::0:12"}])
    other["metadata"]["name"] = "sglang-0"
    unannotated = pod_with(status__podIP="10.244.3.19")  # no scrape annotation needed for an address
    unannotated["metadata"].update(name="tgi-0", annotations={})
    host_network = pod_with(spec__hostNetwork=True, status__podIP="192.168.1.5")
    pending = pod_with(status__phase="Pending", status__podIP="10.244.3.20")
    elsewhere = pod_with(spec__nodeName="gpu-node-2", status__podIP="10.244.3.21")
    pods = {str(i): pod for i, pod in enumerate((POD, other, unannotated, host_network, pending, elsewhere))}
    assert pod_ips(pods, NODE) == {
        "10.244.3.17": ("inference", "llama-8b-vllm-7d9f8c6b5d-x2k4q"),
        "10.244.3.18": ("inference", "sglang-0"),
        "fd00::12": ("inference", "sglang-0"),
        "10.244.3.19": ("inference", "tgi-0"),
    }


def test_an_ip_two_pods_claim_names_neither():
    twin = pod_with()
    twin["metadata"]["name"] = "stale-copy"
    assert pod_ips({"a": POD, "b": twin}, NODE) == {}


def test_dynamic_sources_keep_the_source_of_a_target_that_stays_and_close_the_removed():
    first = EngineTarget(url="http://10.244.3.17:8000/metrics", name="inference/a")
    second = EngineTarget(url="http://10.244.3.22:30000/metrics", name="inference/b")
    dynamic = DynamicEngineSources(window_seconds=60)
    dynamic.update([Candidate(first), Candidate(second)])
    kept, removed = dynamic.sources()
    closed = []
    removed.close = lambda: closed.append(removed.target)  # type: ignore[method-assign]
    dynamic.update([Candidate(first)])
    assert dynamic.sources() == [kept] and closed == ["inference/b"]


def test_dynamic_sources_cap_the_number_of_engines():
    targets = [EngineTarget(url=f"http://10.244.3.{i}:8000/metrics", name=f"ns/pod-{i:02d}") for i in range(10)]
    dynamic = DynamicEngineSources(window_seconds=60, max_sources=3)
    dynamic.update([Candidate(target, namespace="ns") for target in targets])
    assert [s.target for s in dynamic.sources()] == ["ns/pod-00", "ns/pod-01", "ns/pod-02"]
    assert dynamic.dropped == tuple(f"ns/pod-{i:02d}" for i in range(3, 10))


def annotated_pod(namespace: str, name: str, ip: str, gpus: int = 0, owner: str | None = None) -> dict:
    pod = pod_with(status__podIP=ip)
    pod["metadata"].update(name=name, namespace=namespace)
    if owner:
        pod["metadata"]["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "controller": True}]
    if gpus:
        pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return pod


def discovered(pods: list[dict], max_engines: int = 32) -> DynamicEngineSources:
    dynamic = DynamicEngineSources(window_seconds=60, max_sources=max_engines)
    candidates = []
    for pod in pods:
        target, reason = target_for_pod(pod, NODE, SETTINGS)
        assert target is not None, reason
        candidates.append(candidate_for(pod, target))
    dynamic.update(candidates)
    return dynamic


DECOYS = [annotated_pod("aaa", f"decoy-{i:02d}", f"10.244.4.{i}") for i in range(32)]


@pytest.mark.parametrize("gpus", [1, 0])
def test_decoys_in_one_namespace_cannot_crowd_out_the_real_engine(gpus, caplog):
    real = annotated_pod("inference", "llama-8b-vllm-0", "10.244.3.17", gpus=gpus)
    with caplog.at_level(logging.WARNING, logger="exporter.discovery.targets"):
        dynamic = discovered([*DECOYS, real])
    scraped = [target.name for target in dynamic.targets()]
    assert "inference/llama-8b-vllm-0" in scraped and len(scraped) == 32
    # The one left out is named, in the state the metric reports and in the log.
    assert len(dynamic.dropped) == 1 and dynamic.dropped[0].startswith("aaa/decoy-")
    assert dynamic.dropped[0] in caplog.text and "max_engines=32" in caplog.text


def test_pods_holding_gpus_come_first_even_past_other_namespaces():
    others = [annotated_pod(f"ns-{i}", "engine", f"10.244.5.{i}") for i in range(4)]
    gpu_pod = annotated_pod("zzz", "engine", "10.244.3.17", gpus=8)
    assert [t.name for t in discovered([*others, gpu_pod], max_engines=2).targets()] == ["zzz/engine", "ns-0/engine"]


def test_round_robin_across_owners_within_a_namespace():
    replicas = [annotated_pod("inference", f"big-{i}", f"10.244.6.{i}", owner="big-rs") for i in range(5)]
    other = annotated_pod("inference", "small-0", "10.244.6.99", owner="small-rs")
    names = [t.name for t in discovered([*replicas, other], max_engines=2).targets()]
    assert names == ["inference/big-0", "inference/small-0"]


def test_accelerators_are_read_from_limits_or_requests_and_zero_is_none():
    pod = annotated_pod("inference", "a", "10.244.3.17")
    target, _ = target_for_pod(pod, NODE, SETTINGS)
    assert target is not None
    for resources, holds in (
        ({"limits": {"nvidia.com/gpu": "1"}}, True),
        ({"requests": {"amd.com/gpu": 2}}, True),
        ({"limits": {"nvidia.com/mig-1g.10gb": "1"}}, True),
        ({"limits": {"habana.ai/gaudi": "8"}}, True),
        ({"limits": {"nvidia.com/gpu": "0", "cpu": "4"}}, False),
        ({"limits": {"memory": "1Gi"}}, False),
    ):
        pod["spec"]["containers"][0]["resources"] = resources
        assert candidate_for(pod, target).accelerators is holds, resources


def test_discovery_status_reports_scraped_and_dropped_targets():
    dynamic = discovered([*DECOYS, annotated_pod("inference", "real", "10.244.3.17")])
    status = DiscoveryStatus(SimpleNamespace(error=None, engines=dynamic))  # type: ignore[arg-type]
    values = {m.labels["state"]: m.value for m in status.collect(0.0) if isinstance(m, Sample)}
    assert values == {"scraped": 32.0, "dropped": 1.0}
    assert all(m.name in CATALOGUE for m in status.collect(0.0))


class NamedSource(Source):
    name = "engine"

    def __init__(self, target: str, fail: bool = False) -> None:
        self.target = target
        self.fail = fail

    def collect(self, now: float) -> list:
        if self.fail:
            raise SourceError("connection", "refused")
        return [Sample("llm_engine_up", {"engine": self.target}, 1.0)]


class Group:
    max_sources = 4

    def __init__(self) -> None:
        self.members: list[Source] = []
        self.closed = False

    def sources(self) -> list[Source]:
        return list(self.members)

    def close(self) -> None:
        self.closed = True


def test_loop_asks_its_groups_for_their_sources_every_round():
    group = Group()
    loop = CollectionLoop([NamedSource("static")], interval_seconds=5, groups=[group])
    group.members = [NamedSource("ns/a", fail=True)]
    first = loop.collect_once()
    assert [s.target for s in first.statuses] == ["static", "ns/a"]
    assert first.error_counts == {("engine", "ns/a", "connection"): 1}
    group.members = [NamedSource("ns/b")]
    second = loop.collect_once()
    assert [s.target for s in second.statuses] == ["static", "ns/b"]
    assert {m.labels["engine"] for m in second.metrics} == {"static", "ns/b"}
    assert second.error_counts == {}  # a gone pod's error counter goes with it
    loop.stop()
    assert group.closed


def test_kubernetes_configuration_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"^kubernetes.enabled: must be true or false"):
        build({"kubernetes": {"enabled": "yes"}})
    with pytest.raises(ConfigError, match=r"^kubernetes.namespace: unknown key"):
        build({"kubernetes": {"namespace": "x"}})
    with pytest.raises(ConfigError, match=r"^kubernetes.max_engines: must be a whole number"):
        build({"kubernetes": {"max_engines": 2.5}})
    config = build({"kubernetes": {"enabled": True, "resync_seconds": 60}, "engine_defaults": {"timeout_seconds": 3}})
    assert config.kubernetes.enabled and config.kubernetes.resync_seconds == 60
    assert config.kubernetes.limits.timeout_seconds == 3
