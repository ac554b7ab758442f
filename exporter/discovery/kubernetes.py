"""Engines on this node, found from pod annotations through the Kubernetes API (list + watch).

A pod opts in with annotations (values are strings, as Kubernetes requires):

    llm-bottleneck-exporter/scrape: "true"       required
    llm-bottleneck-exporter/port:   "8000"       the metrics port; default: the pod's only declared port
    llm-bottleneck-exporter/path:   "/metrics"   default /metrics
    llm-bottleneck-exporter/type:   "vllm"       an engine type (exporter/sources/engines/); default: detected
    llm-bottleneck-exporter/role:   "decode"     unified, prefill, decode or encode; default: llm-d's
                                                 `llm-d.ai/role` pod label, else the engine's series

Whoever can create a pod can write annotations, so they choose a port and a path and nothing else:
the URL is always `http://<status.podIP>:<port><path>` of a Running pod whose `spec.nodeName` is
this node (checked here too, not only by the API's field selector), the path cannot carry a host,
the built URL is parsed back and must name the pod's IP, and redirects are not followed. Each
engine is named `<namespace>/<pod>` and carries `pod`, `namespace` and `container` labels.

The client follows client-go's reflector: list (with `fieldSelector=spec.nodeName=<node>`), then
watch from the list's resourceVersion; a watch that ends is resumed from the last version seen;
410 Gone (the version was compacted away) means list again; and a full list every
`resync_seconds` repairs anything a lost event could have left wrong.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from exporter.discovery.kubeapi import ApiError, KubernetesApi, ResourceExpired, in_cluster_api
from exporter.discovery.targets import Candidate, DynamicEngineSources
from exporter.model import Metric, Sample
from exporter.settings import ENGINE_ROLES, EngineTarget, KubernetesSettings
from exporter.sources.base import Source, SourceError
from exporter.sources.engines import MAPPINGS as ENGINES
from exporter.sources.engines.roles import normalized
from exporter.validation import ConfigError

log = logging.getLogger(__name__)

ANNOTATION_PREFIX = "llm-bottleneck-exporter/"
SCRAPE, PORT, PATH, TYPE, ROLE = (ANNOTATION_PREFIX + key for key in ("scrape", "port", "path", "type", "role"))
#: llm-d's pod label for a P/D deployment's pools (prefill, decode, both/prefill-decode, encode)
LLMD_ROLE_LABEL = "llm-d.ai/role"
DEFAULT_PATH = "/metrics"
# Path characters RFC 3986 allows, less those that could end the path or start another part of the
# URL: no "?", "#", "\", "@", whitespace, and no leading "//" (an authority to some parsers).
_SAFE_PATH = re.compile(r"/(?!/)[A-Za-z0-9._~!$&'()*+,;=:%/-]{0,1023}")
_PORT = re.compile(r"[0-9]{1,5}")
MAX_BACKOFF_SECONDS = 30.0
# Extended resources of accelerators besides any `<vendor>/gpu` (device plugins' names).
ACCELERATOR_RESOURCE_PREFIXES = ("habana.ai/", "aws.amazon.com/neuron", "google.com/tpu", "gpu.intel.com/")


def target_for_pod(
    pod: Mapping[str, Any], node_name: str, settings: KubernetesSettings
) -> tuple[EngineTarget | None, str]:
    """The engine target a pod asks for, or None and why not ("" when it did not ask)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    if annotations.get(SCRAPE) != "true":
        return None, ""
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    if spec.get("nodeName") != node_name:
        return None, f"scheduled on node {spec.get('nodeName')!r}, not this node {node_name!r}"
    if status.get("phase") != "Running":
        return None, f"phase is {status.get('phase')!r}, not Running"
    try:
        ip = ipaddress.ip_address(str(status.get("podIP", "")))
    except ValueError:
        return None, f"no valid pod IP ({status.get('podIP')!r})"
    port_text = annotations.get(PORT)
    if port_text is None:
        declared = sorted({p["containerPort"] for p in _container_ports(spec)})
        if len(declared) != 1:
            return None, f"no {PORT} annotation and {len(declared)} declared container ports to choose from"
        port = int(declared[0])
    elif isinstance(port_text, str) and _PORT.fullmatch(port_text) and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        return None, f"{PORT} {port_text!r} is not a port number"
    path = annotations.get(PATH, DEFAULT_PATH)
    if not isinstance(path, str) or not _SAFE_PATH.fullmatch(path):
        return None, f"{PATH} {path!r} is not a plain absolute path"
    engine_type = annotations.get(TYPE)
    if engine_type is not None and engine_type not in ENGINES:
        return None, f"{TYPE} {engine_type!r} is not one of {', '.join(ENGINES.names())}"
    role_word = annotations.get(ROLE) or (meta.get("labels") or {}).get(LLMD_ROLE_LABEL)
    role = normalized(role_word) if isinstance(role_word, str) else None
    if role_word is not None and role is None:
        return None, f"role {role_word!r} is not one of {', '.join(ENGINE_ROLES)}"
    host = f"[{ip.compressed}]" if ip.version == 6 else ip.compressed
    url = f"http://{host}:{port}{path}"
    parts = urlsplit(url)
    if parts.hostname is None or ipaddress.ip_address(parts.hostname) != ip or parts.port != port:
        return None, f"the URL built from the annotations, {url!r}, does not point at the pod"  # defence in depth
    container = _container_for(spec, port)
    return EngineTarget(
        url=url,
        name=f"{namespace}/{name}",
        type=engine_type,
        limits=settings.limits,
        labels=(("pod", name), ("namespace", namespace), ("container", container)),
        follow_redirects=False,
        role=role,
        role_source="kubernetes" if role else "configuration",
    ), ""


def pod_ips(pods: Mapping[str, Mapping[str, Any]], node_name: str) -> dict[str, tuple[str, str]]:
    """IP → (namespace, pod) of the Running pods of this node with their own network namespace.

    What ties an engine URL given by address (`--engine vllm=http://10.1.2.3:8000/metrics`) to its
    pod, and so to the GPUs its pod holds. A hostNetwork pod has the node's IP, shared with every
    other such pod, and an IP two pods claim (a stale list) names neither: both are left out.
    """
    claims: dict[str, set[tuple[str, str]]] = {}
    for pod in pods.values():
        meta, spec, status = (pod.get(k) or {} for k in ("metadata", "spec", "status"))
        if spec.get("hostNetwork") or spec.get("nodeName") != node_name or status.get("phase") != "Running":
            continue
        owner = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        addresses = {str(status.get("podIP", ""))} | {str(a.get("ip", "")) for a in status.get("podIPs") or []}
        for address in addresses:
            try:
                claims.setdefault(ipaddress.ip_address(address).compressed, set()).add(owner)
            except ValueError:
                continue
    return {ip: next(iter(owners)) for ip, owners in claims.items() if len(owners) == 1}


def _container_ports(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    ports = []
    for container in spec.get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("protocol", "TCP") == "TCP" and isinstance(port.get("containerPort"), int):
                ports.append({**port, "container": container.get("name", "")})
    return ports


def _container_for(spec: Mapping[str, Any], port: int) -> str:
    """The container declaring the port; else the pod's only container; else "" (unknown)."""
    for declared in _container_ports(spec):
        if declared["containerPort"] == port:
            return str(declared["container"])
    containers = spec.get("containers") or []
    return str(containers[0].get("name", "")) if len(containers) == 1 else ""


def holds_accelerators(spec: Mapping[str, Any]) -> bool:
    """Whether any container limits or requests a nonzero amount of an accelerator resource
    (`nvidia.com/gpu`, `amd.com/gpu`, MIG slices, Gaudi, Neuron, TPU)."""
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            for name, amount in (resources.get(section) or {}).items():
                if _is_accelerator(str(name)) and str(amount).strip() not in ("", "0"):
                    return True
    return False


def _is_accelerator(resource: str) -> bool:
    return resource.endswith("/gpu") or "/mig-" in resource or resource.startswith(ACCELERATOR_RESOURCE_PREFIXES)


def candidate_for(pod: Mapping[str, Any], target: EngineTarget) -> Candidate:
    """What decides the target's place when more pods ask than max_engines (targets.py)."""
    meta = pod.get("metadata") or {}
    owners = [ref for ref in meta.get("ownerReferences") or [] if isinstance(ref, Mapping)]
    controller = next((ref for ref in owners if ref.get("controller")), owners[0] if owners else None)
    owner = f"{controller.get('kind', '')}/{controller.get('name', '')}" if controller else ""
    return Candidate(
        target=target,
        namespace=str(meta.get("namespace", "")),
        owner=owner,
        accelerators=holds_accelerators(pod.get("spec") or {}),
    )


class DiscoveryStatus(Source):
    """`llm_exporter_source_up{source="kubernetes"}`: 0 while the API cannot be read."""

    name = "kubernetes"
    target = "pods"
    timeout_seconds = 1.0

    def __init__(self, discovery: KubernetesEngineDiscovery) -> None:
        self._discovery = discovery

    def collect(self, now: float) -> list[Metric]:
        error = self._discovery.error
        if error:
            raise SourceError("api", error)
        engines = self._discovery.engines
        counts = {"scraped": len(engines.targets()), "dropped": len(engines.dropped)}
        return [Sample("llm_exporter_discovery_targets", {"state": state}, float(n)) for state, n in counts.items()]


class KubernetesEngineDiscovery:
    """A SourceGroup (exporter.sources.base): the discovery status plus one engine source per annotated pod."""

    def __init__(
        self,
        settings: KubernetesSettings,
        window_seconds: float,
        lifetime_baseline: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        environ = os.environ if environ is None else environ
        self.settings = settings
        self.node_name = settings.node_name or environ.get("NODE_NAME", "")
        if not self.node_name:
            raise ConfigError("kubernetes.node_name", "not set, and NODE_NAME is empty (set it from spec.nodeName)")
        base_url, verify = in_cluster_api(settings, environ)
        if settings.token_file and not os.path.isfile(settings.token_file):
            raise ConfigError(
                "kubernetes.token_file", f"{settings.token_file} does not exist (is automountServiceAccountToken off?)"
            )
        self.max_sources = settings.max_engines + 1
        self.engines = DynamicEngineSources(window_seconds, lifetime_baseline, settings.max_engines)
        self._status = DiscoveryStatus(self)
        self._api = KubernetesApi(base_url, settings.token_file, verify)
        self._pods: dict[str, dict[str, Any]] = {}
        #: replaced whole on every change, so readers on other threads see one list's view
        self._pod_ips: dict[str, tuple[str, str]] = {}
        self._resource_version = ""
        self._next_resync = 0.0
        self._skipped: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = "no list of pods yet"

    def start(self) -> None:
        """List once now (so the first collection has the engines), then watch in a thread."""
        try:
            self._relist()
        except ApiError as exc:
            self._failed(exc)
        self._thread = threading.Thread(target=self._run, name="kubernetes-discovery", daemon=True)
        self._thread.start()

    def sources(self) -> list[Source]:
        return [self._status, *self.engines.sources()]

    def pod_at(self, address: str) -> tuple[str, str] | None:
        """(namespace, pod) of the pod on this node whose IP `address` is (pod_ips), or None."""
        try:
            return self._pod_ips.get(ipaddress.ip_address(address).compressed)
        except ValueError:
            return None

    def close(self) -> None:
        self._stop.set()
        self._api.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.engines.close()

    def _run(self) -> None:
        backoff = 1.0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if not self._resource_version or started >= self._next_resync:
                    self._relist()
                events = self._watch()
            except ResourceExpired:
                log.info("kubernetes: resourceVersion %s expired (410 Gone); listing again", self._resource_version)
                self._resource_version = ""
                continue
            except ApiError as exc:
                if self._stop.is_set():
                    return
                self._failed(exc)
                self._stop.wait(backoff)
                backoff = min(2 * backoff, MAX_BACKOFF_SECONDS)
                continue
            if events or time.monotonic() - started >= 1.0:
                backoff = 1.0
            else:  # a watch that ends at once, again and again, must not spin
                self._stop.wait(backoff)
                backoff = min(2 * backoff, MAX_BACKOFF_SECONDS)

    def _relist(self) -> None:
        items, resource_version = self._api.list_pods(self.node_name)
        self._pods = {_pod_key(pod): pod for pod in items}
        self._resource_version = resource_version
        self._next_resync = time.monotonic() + self.settings.resync_seconds
        if self.error:
            log.info("kubernetes: listed %d pods on node %s", len(items), self.node_name)
        self.error = None
        self._publish()

    def _watch(self) -> int:
        """Apply watch events until the watch ends; return how many there were."""
        timeout = max(1, int(self._next_resync - time.monotonic()))
        count = 0
        events = self._api.watch_pods(self.node_name, self._resource_version, timeout)
        self.error = None
        for event in events:
            if self._stop.is_set():
                break
            self._apply(event)
            count += 1
        return count

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise ResourceExpired(str(obj.get("message", "")))
            raise ApiError(f"watch error {obj.get('code')}: {obj.get('message', '')}")
        resource_version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        if kind in ("ADDED", "MODIFIED"):
            self._pods[_pod_key(obj)] = obj
        elif kind == "DELETED":
            self._pods.pop(_pod_key(obj), None)
        elif kind != "BOOKMARK":
            log.debug("kubernetes: ignoring watch event of type %r", kind)
            return
        if resource_version:
            self._resource_version = resource_version
        if kind != "BOOKMARK":
            self._publish()

    def _publish(self) -> None:
        self._pod_ips = pod_ips(self._pods, self.node_name)
        candidates = []
        skipped = {}
        for key, pod in sorted(self._pods.items()):
            target, reason = target_for_pod(pod, self.node_name, self.settings)
            if target is not None:
                candidates.append(candidate_for(pod, target))
            elif reason:
                skipped[key] = reason
                if self._skipped.get(key) != reason:
                    log.warning("kubernetes: not scraping pod %s: %s", key, reason)
        self._skipped = skipped
        self.engines.update(candidates)

    def _failed(self, exc: ApiError) -> None:
        message = str(exc)
        if message != self.error:
            log.warning("kubernetes: %s", message)
        self.error = message


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
