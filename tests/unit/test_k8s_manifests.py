"""The deployment files as a careful SRE would check them before applying them, all offline.

- Every manifest, as its kustomization renders it (base and each overlay), validates against the
  Kubernetes OpenAPI schemas that PyPI `kubernetes-validate` ships (strict: unknown fields fail),
  and the prometheus-operator resources against that operator's CRD models
  (`cloudcoil-models-prometheus-operator`).
- The rendering is a small loader of ours (`render`), since no kustomize binary is installable from
  PyPI or Debian: resources (files and directories), JSON 6902 patches and image overrides, which
  is all these kustomizations use; anything else in a kustomization fails the test rather than
  being ignored.
- The DaemonSet references only ConfigMaps, ServiceAccounts and volumes the bundle has.
- checkov and hadolint run as processes, so they are in tests/integration/test_deploy_linters.py.
- The compose file parses and every path it mounts exists in the repository.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.prometheus_operator import v1 as monitoring_v1

from exporter.config import build
from tests.kustomize import BASE, BUNDLE_IDS, BUNDLES, DEPLOY, REPO, apply_operation, containers, one, render
from tests.perf.image_env import IMAGE_ENV

# The oldest Kubernetes release still supported upstream when this was written, and the newest the
# installed kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.31", kubernetes_validate.utils.latest_version())
CRD_MODELS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): monitoring_v1.ServiceMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): monitoring_v1.PrometheusRule,
}


@pytest.fixture(scope="module", params=BUNDLES, ids=BUNDLE_IDS)
def bundle(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(request.param)


def test_json_patch_operations_follow_rfc_6902():
    document = {"a": {"b/c": [1, 2]}, "d": 1}
    apply_operation(document, {"op": "add", "path": "/a/b~1c/1", "value": 9})
    apply_operation(document, {"op": "remove", "path": "/d"})
    apply_operation(document, {"op": "add", "path": "/a/b~1c/-", "value": 3})
    assert document == {"a": {"b/c": [1, 9, 2, 3]}}
    with pytest.raises(AssertionError):
        apply_operation(document, {"op": "test", "path": "/a/b~1c/0", "value": 2})


# ---- schemas --------------------------------------------------------------------------------


def _unknown_fields(original: Any, dumped: Any, path: str = "") -> list[str]:
    if isinstance(original, dict):
        found = []
        for key, value in original.items():
            if not isinstance(dumped, dict) or key not in dumped:
                found.append(f"{path}.{key}")
            else:
                found += _unknown_fields(value, dumped[key], f"{path}.{key}")
        return found
    if isinstance(original, list) and isinstance(dumped, list):
        return [
            f for index, (a, b) in enumerate(zip(original, dumped)) for f in _unknown_fields(a, b, f"{path}[{index}]")
        ]
    return []


@pytest.fixture(scope="module", autouse=True)
def schemas_parsed_once() -> Iterator[None]:
    """kubernetes-validate reads and parses its schema files (the shared definitions are over a
    megabyte) on every call; validation only reads them, so one parse per file serves all."""
    original = kubernetes_validate.utils.schema_contents
    kubernetes_validate.utils.schema_contents = functools.cache(original)
    yield
    kubernetes_validate.utils.schema_contents = original


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_manifest_validates_against_the_kubernetes_schemas(bundle, version):
    for document in bundle:
        name = f"{document['kind']}/{document['metadata']['name']}"
        model = CRD_MODELS.get((document["apiVersion"], document["kind"]))
        if model is not None:
            parsed = model.model_validate(document)
            dumped = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
            assert _unknown_fields(document, dumped) == [], f"{name}: fields the CRD does not have"
            continue
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.utils.ValidationError as exc:
            raise AssertionError(f"{name} (Kubernetes {version}): {exc.message} at {list(exc.absolute_path)}") from None


def test_schema_validation_rejects_a_misspelt_field():
    daemonset = copy.deepcopy(one(render(BASE), "DaemonSet"))
    daemonset["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFileSystem"] = True
    with pytest.raises(kubernetes_validate.utils.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_VERSIONS[-1], strict=True)


# ---- references within the bundle --------------------------------------------------------------


def test_daemonset_references_only_what_the_bundle_has(bundle):
    daemonset = one(bundle, "DaemonSet")
    namespace = daemonset["metadata"]["namespace"]
    pod = daemonset["spec"]["template"]["spec"]
    named = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in bundle}
    assert ("ServiceAccount", namespace, pod["serviceAccountName"]) in named
    assert ("Namespace", None, namespace) in named
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert len(volumes) == len(pod["volumes"]), "duplicate volume names"
    mounted = set()
    for container in containers(daemonset):
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in volumes, f"volumeMount {mount['name']} has no volume"
            mounted.add(mount["name"])
        for env in container.get("env", []):
            source = env.get("valueFrom", {})
            assert "secretKeyRef" not in source, "the bundle has no Secrets"
            if "configMapKeyRef" in source:
                assert ("ConfigMap", namespace, source["configMapKeyRef"]["name"]) in named
        for source in container.get("envFrom", []):
            assert ("ConfigMap", namespace, source["configMapRef"]["name"]) in named
    assert mounted == set(volumes), f"volumes nobody mounts: {set(volumes) - mounted}"
    for volume in volumes.values():
        assert "secret" not in volume and "persistentVolumeClaim" not in volume
        if "configMap" in volume:
            assert ("ConfigMap", namespace, volume["configMap"]["name"]) in named


def test_service_account_binding_service_and_monitor_point_at_each_other(bundle):
    daemonset = one(bundle, "DaemonSet")
    namespace = daemonset["metadata"]["namespace"]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    binding = one(bundle, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == one(bundle, "ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": daemonset["spec"]["template"]["spec"]["serviceAccountName"],
            "namespace": namespace,
        }
    ]
    # The exporter's own objects; an overlay may add some in another namespace (ascend's access to npu-exporter).
    own = [d for d in bundle if d["metadata"].get("namespace", namespace) == namespace]
    service = one(own, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(9477, "metrics")]
    assert port_names == {"metrics": 9477}
    monitor = one(bundle, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [namespace]
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    # The generated rules select job="<Service name>", which is what prometheus-operator sets.
    rules = yaml.safe_dump(one(bundle, "PrometheusRule")["spec"])
    assert f'job="{service["metadata"]["name"]}"' in rules
    policy = one(own, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_rbac_grants_reading_pods_and_nothing_else(bundle):
    roles = [d for d in bundle if d["kind"] in ("ClusterRole", "Role")]
    assert [r["rules"] for r in roles] == [
        [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    ]


def test_configmap_holds_a_valid_exporter_configuration_with_discovery_on(bundle):
    daemonset = one(bundle, "DaemonSet")
    volume = next(v for v in daemonset["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    configmap = one(bundle, "ConfigMap", volume["configMap"]["name"])
    args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
    mount = next(
        m for m in daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"] == volume["name"]
    )
    assert f"--config={mount['mountPath']}/config.yaml" in args
    config = build(yaml.safe_load(configmap["data"]["config.yaml"]))
    assert config.kubernetes.enabled and config.listen_port == 9477 and config.sysfs == "/host/sys"
    sys_mount = next(
        m for m in daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"] == "sys"
    )
    assert sys_mount["mountPath"] == config.sysfs
    socket_path = config.gpu_attribution.pod_resources_socket
    mounts = {m["mountPath"] for m in daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert (socket_path == "") == (os.path.dirname(socket_path) not in mounts)


# ---- what the issue asks of the DaemonSet --------------------------------------------------------


def test_daemonset_runs_on_gpu_nodes_with_every_gpu_and_read_only_host_paths():
    daemonset = one(render(BASE), "DaemonSet")
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert pod["runtimeClassName"]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"} in container["env"]
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in container["env"]
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert set(host_paths.values()) == {"/sys", "/var/lib/kubelet/pod-resources"}
    for mount in container["volumeMounts"]:
        if mount["name"] in host_paths:
            assert mount.get("readOnly") is True, mount
    assert pod["hostPID"] is False and pod["hostNetwork"] is False and pod["hostIPC"] is False
    assert container["ports"] == [{"name": "metrics", "containerPort": 9477, "protocol": "TCP"}]
    resources = container["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}


@pytest.mark.parametrize(
    "overlay, added",
    [("base", None), ("non-root", None), ("dcgm-profiling", ["SYS_ADMIN"]), ("process-attribution", ["SYS_PTRACE"])],
)
def test_capabilities_are_all_dropped_except_what_the_variant_needs(overlay, added):
    directory = BASE if overlay == "base" else DEPLOY / "overlays" / overlay
    daemonset = one(render(directory), "DaemonSet")
    security = daemonset["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["capabilities"].get("add") == added
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["privileged"] is False
    assert security["runAsNonRoot"] is (overlay == "non-root")
    assert daemonset["spec"]["template"]["spec"]["hostPID"] is (overlay == "process-attribution")


def test_dcgm_overlay_runs_the_dcgm_image_variant_with_gpu_dcgm():
    bundle = render(DEPLOY / "overlays" / "dcgm-profiling")
    container = one(bundle, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"].endswith("-dcgm")
    assert (
        build(
            yaml.safe_load(one(bundle, "ConfigMap", "llm-bottleneck-exporter-config")["data"]["config.yaml"])
        ).gpu.mode
        == "dcgm"
    )
    dockerfile = (REPO / "Dockerfile").read_text()
    assert (
        "AS runtime-dcgm" in dockerfile
        and "ENV PYTHONPATH=/usr/share/datacenter-gpu-manager-4/bindings/python3" in dockerfile
    )


# ---- the image's inputs ----------------------------------------------------------------------


def test_dockerfile_copies_only_files_that_exist_and_the_build_context_keeps():
    dockerfile = (REPO / "Dockerfile").read_text()
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    sources = re.findall(r"^COPY (?!--from)(.+?) \S+$", dockerfile, flags=re.M)
    assert sources
    for group in sources:
        for source in group.split():
            assert (REPO / source).exists(), f"COPY {source}: no such file"
            assert source.rstrip("/") in kept, f"COPY {source}: excluded by .dockerignore"


def test_the_soak_runs_the_exporter_with_the_images_allocator_settings():
    image = (REPO / "Dockerfile").read_text().split("FROM runtime-${VARIANT}", 1)[1]
    settings = dict(re.findall(r"\b([A-Z_]+)=(\S+)", " ".join(re.findall(r"^ENV (?:.*\\\n)*.*$", image, flags=re.M))))
    assert IMAGE_ENV and all(settings.get(name) == value for name, value in IMAGE_ENV.items()), settings


# ---- compose ---------------------------------------------------------------------------------


def test_compose_file_parses_and_every_mounted_path_exists():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"exporter", "prometheus", "alertmanager", "grafana"}
    build_section = services["exporter"]["build"]
    assert (DEPLOY / build_section["context"] / build_section["dockerfile"]).resolve() == REPO / "Dockerfile"
    mirrors: dict[str, dict[str, Path]] = {}
    for name, service in services.items():
        mirrors[name] = {}
        for volume in service.get("volumes", []):
            source, target, *_ = volume.split(":")
            if source.startswith((".", "/")):
                host = (DEPLOY / source).resolve() if source.startswith(".") else Path(source)
                if source.startswith("."):
                    assert REPO in host.parents or host == REPO, f"{name}: {source} is outside the repository"
                    assert host.exists(), f"{name}: mounted path {source} ({host.relative_to(REPO)}) does not exist"
                else:
                    assert source in ("/sys",), f"{name}: unexpected host path {source}"
                mirrors[name][target] = host
            else:
                assert source in compose["volumes"], f"{name}: named volume {source} is not declared"

    # Paths in the services' flags and configs are inside their mounts and exist there.
    def on_host(service: str, container_path: str) -> Path:
        for target, host in sorted(mirrors[service].items(), key=lambda item: -len(item[0])):
            if container_path == target or container_path.startswith(target.rstrip("/") + "/"):
                return host / os.path.relpath(container_path, target)
        raise AssertionError(f"{service}: {container_path} is not in any mount")

    for service in ("prometheus", "alertmanager"):
        flag = next(a for a in services[service]["command"] if a.startswith("--config.file="))
        assert on_host(service, flag.split("=", 1)[1]).is_file()
    prometheus_config = next(a for a in services["prometheus"]["command"] if a.startswith("--config.file=")).split(
        "=", 1
    )[1]
    for rule_file in yaml.safe_load(on_host("prometheus", prometheus_config).read_text())["rule_files"]:
        assert on_host(
            "prometheus", os.path.normpath(os.path.join(os.path.dirname(prometheus_config), rule_file))
        ).is_file()
    provisioning = on_host("grafana", "/etc/grafana/provisioning")
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert datasources[0]["url"].endswith(":9090")
    for provider in yaml.safe_load((provisioning / "dashboards" / "llm-bottleneck.yaml").read_text())["providers"]:
        dashboards = on_host("grafana", provider["options"]["path"])
        assert any(dashboards.glob("*.json")), f"no dashboards in {dashboards.relative_to(REPO)} (run generate)"


@pytest.mark.parametrize(
    "overlay, mode, selector, toleration",
    [
        ("amd", "amd-exporter", {"feature.node.kubernetes.io/amd-gpu": "true"}, "amd.com/gpu"),
        ("ascend", "ascend-exporter", {"accelerator": "huawei-Ascend910"}, "huawei.com/Ascend910"),
    ],
)
def test_vendor_overlays_read_the_vendor_exporter_on_the_vendor_s_nodes(overlay, mode, selector, toleration):
    bundle = render(DEPLOY / "overlays" / overlay)
    pod = one(bundle, "DaemonSet")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == selector and "runtimeClassName" not in pod
    assert [t["key"] for t in pod["tolerations"]] == [toleration]
    assert not any(e["name"].startswith("NVIDIA_") for e in pod["containers"][0]["env"])
    config = build(yaml.safe_load(one(bundle, "ConfigMap", "llm-bottleneck-exporter-config")["data"]["config.yaml"]))
    assert config.gpu.mode == mode and config.gpu.url and config.gpu.url.endswith("/metrics")


def test_ascend_overlay_reaches_only_this_node_s_npu_exporter():
    bundle = render(DEPLOY / "overlays" / "ascend")
    config = build(yaml.safe_load(one(bundle, "ConfigMap", "llm-bottleneck-exporter-config")["data"]["config.yaml"]))
    service = one(bundle, "Service", "npu-exporter-node-local")
    assert service["spec"]["internalTrafficPolicy"] == "Local" and service["spec"]["selector"] == {
        "app": "npu-exporter"
    }
    assert config.gpu.url == f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:8082/metrics"
    policy = one(bundle, "NetworkPolicy", "llm-bottleneck-exporter-ingress")
    pod_labels = one(bundle, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    allowed = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    assert allowed.items() <= pod_labels.items()
