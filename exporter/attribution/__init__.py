"""Which engine uses which GPU: the labels that tie `llm_gpu_*` series to `llm_engine_*` series.

Three methods, the first that names an engine for a GPU wins:
1. the static map of the configuration (`gpu_attribution.static`);
2. processes: the engine's listening port → its PID → its process tree, intersected with the PIDs
   NVML reports on each GPU;
3. pods: which pod holds each GPU comes from the kubelet pod-resources API or from the GPU source's
   own pod labels (dcgm-exporter's, the AMD/Ascend/Gaudi exporters'); the engine's pod comes from
   `gpu_attribution.engine_pods`, from the target itself (a discovered engine's `pod`/`namespace`
   labels; an engine URL whose host is a pod's IP, where Kubernetes discovery lists the node's
   pods), or from the HOSTNAME of the engine's process when that names one of those pods.
The pod/namespace/container are added to a GPU's labels whether or not an engine matched.
Process and pod lookups run at most every `refresh_seconds` (the kubelet rate-limits `List`).
GPUs none of these ties to an engine stay unattributed; the diagnosis then reads them node-wide
(docs/diagnosis.md, "GPUs no engine is tied to").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from exporter.attribution.podresources import PodContainer, PodResourcesClient, PodResourcesError
from exporter.engine_processes import EngineProcess, EngineProcesses, pod_name_of, target_endpoint
from exporter.settings import EngineTarget, GpuAttribution

#: an address (a URL's host) → the (namespace, pod) whose IP it is, or None
PodAt = Callable[[str], "tuple[str, str] | None"]

log = logging.getLogger(__name__)

__all__ = ["Attributor", "GpuRef", "PodContainer"]


@dataclass(frozen=True)
class GpuRef:
    """What attribution needs to know of one GPU (or MIG instance)."""

    index: str
    uuid: str = ""
    pids: frozenset[int] = frozenset()
    # Pods the source itself reported for this GPU (dcgm-exporter's pod labels).
    owners: frozenset[PodContainer] = frozenset()
    # Other names a device plugin may give it (an AMD GPU's PCI address).
    device_ids: tuple[str, ...] = ()


class Attributor:
    def __init__(
        self,
        settings: GpuAttribution,
        engines: Callable[[], Sequence[EngineTarget]] | Sequence[EngineTarget],
        processes: EngineProcesses | None = None,
        pod_client: PodResourcesClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        pod_at: PodAt | None = None,
    ) -> None:
        self.settings = settings
        self._pod_at = pod_at
        if callable(engines):
            self._targets = engines
        else:
            fixed = tuple(engines)
            self._targets = lambda: fixed
        self._processes = processes if processes is not None else EngineProcesses(engines)
        if pod_client is None and settings.pod_resources_socket:
            pod_client = PodResourcesClient(settings.pod_resources_socket)
        self._pods = pod_client
        self._clock = clock
        self._next_refresh = float("-inf")
        self._engine_pids: dict[str, EngineProcess] = {}
        #: engine → the HOSTNAME of its own listening process (the pod name inside a pod)
        self._engine_hostnames: dict[str, str] = {}
        #: (namespace, pod) → engine, from the targets themselves (labels, pod IP)
        self._target_pods: dict[tuple[str, str], str] = {}
        self._pod_devices: dict[str, set[PodContainer]] = {}
        self._pod_error: str | None = None
        self._logged: dict[str, tuple[str, ...]] = {}

    def attribute(self, gpus: Sequence[GpuRef]) -> list[dict[str, str]]:
        """Extra labels for each GPU, in order: `engine`, and `pod`/`namespace`/`container`."""
        self._refresh(any(g.pids for g in gpus), any(g.owners for g in gpus))
        engine_of_pod = self._engine_of_pod(gpus)
        result = []
        for gpu in gpus:
            labels: dict[str, str] = {}
            owners = set(gpu.owners) or self._owners(gpu)
            if owners:
                for key, values in (
                    ("namespace", {o.namespace for o in owners}),
                    ("pod", {o.pod for o in owners}),
                    ("container", {o.container for o in owners}),
                ):
                    values.discard("")
                    if values:
                        labels[key] = ",".join(sorted(values))
            engines = (
                self._static_engines(gpu)
                or self._process_engines(gpu)
                or {engine_of_pod[(o.namespace, o.pod)] for o in owners if (o.namespace, o.pod) in engine_of_pod}
            )
            if engines:
                # Two engines time-sharing one GPU: one label value naming both keeps sums over
                # GPUs right, where one series per engine would count the GPU twice.
                labels["engine"] = ",".join(sorted(engines))
            result.append(labels)
        self._log_changes(gpus, result)
        return result

    def close(self) -> None:
        if self._pods is not None:
            self._pods.close()

    # -- the three methods ---------------------------------------------------------------------

    def _static_engines(self, gpu: GpuRef) -> set[str]:
        return {
            engine
            for engine, selectors in self.settings.static.items()
            if gpu.index in selectors or (gpu.uuid and gpu.uuid in selectors)
        }

    def _process_engines(self, gpu: GpuRef) -> set[str]:
        if not gpu.pids:
            return set()
        return {engine for engine, found in self._engine_pids.items() if found.tree & gpu.pids}

    def _owners(self, gpu: GpuRef) -> set[PodContainer]:
        if not self._pod_devices:
            return set()
        owners: set[PodContainer] = set()
        # The device plugin reports UUIDs by default, `nvidiaN` with --device-id-strategy=index.
        for key in (gpu.uuid, f"nvidia{gpu.index}", gpu.index, *gpu.device_ids):
            if key:
                owners |= self._pod_devices.get(key, set())
        return owners

    def _engine_of_pod(self, gpus: Sequence[GpuRef]) -> dict[tuple[str, str], str]:
        """(namespace, pod) → engine: configured, then the targets' own pods, then HOSTNAMEs that
        name exactly one pod holding a GPU (from the kubelet or the GPU source's labels)."""
        mapping = {pod: engine for engine, pod in self.settings.engine_pods.items()}
        for pod, engine in self._target_pods.items():
            mapping.setdefault(pod, engine)
        if not self._engine_hostnames:
            return mapping
        pods_by_name: dict[str, set[tuple[str, str]]] = {}
        for owners in (*self._pod_devices.values(), *(gpu.owners for gpu in gpus)):
            for owner in owners:
                pods_by_name.setdefault(owner.pod, set()).add((owner.namespace, owner.pod))
        tied = set(mapping.values())
        for engine, hostname in sorted(self._engine_hostnames.items()):
            candidates = pods_by_name.get(hostname, set())
            if engine not in tied and len(candidates) == 1:
                mapping.setdefault(next(iter(candidates)), engine)
        return mapping

    # -- lookups -------------------------------------------------------------------------------

    def _refresh(self, have_pids: bool, have_owners: bool) -> None:
        now = self._clock()
        if now < self._next_refresh:
            return
        self._next_refresh = now + self.settings.refresh_seconds
        pods = self._pods if self._pods is not None and self._pods.available() else None
        self._target_pods = self._pods_of_targets()
        wants_processes = self.settings.processes and (have_pids or have_owners or pods is not None)
        self._engine_pids = self._processes.lookup() if wants_processes else {}
        self._engine_hostnames = self._hostnames() if have_owners or pods is not None else {}
        if pods is not None:
            try:
                self._pod_devices = pods.list_gpu_devices()
                self._pod_error = None
            except PodResourcesError as exc:
                if str(exc) != self._pod_error:
                    log.warning("gpu attribution: kubelet pod-resources unavailable: %s", exc)
                self._pod_error = str(exc)
                self._pod_devices = {}
        else:
            self._pod_devices = {}

    def _pods_of_targets(self) -> dict[tuple[str, str], str]:
        """The pod each engine target names itself: a discovered target's `pod`/`namespace` labels,
        or the pod whose IP is the target's host (when Kubernetes discovery lists the pods)."""
        found: dict[tuple[str, str], str] = {}
        for target in self._targets():
            if target.name in self.settings.engine_pods:
                continue
            labels = dict(target.labels)
            pod: tuple[str, str] | None = None
            if labels.get("pod") and labels.get("namespace"):
                pod = (labels["namespace"], labels["pod"])
            elif self._pod_at is not None:
                try:
                    pod = self._pod_at(target_endpoint(target.url)[0])
                except ValueError:
                    pod = None
            if pod is not None:
                found.setdefault(pod, target.name)
        return found

    def _hostnames(self) -> dict[str, str]:
        """Engine → HOSTNAME of its listening process, for engines whose listener is their own: one
        process serving several engine targets (a proxy, a simulator) is no one engine's pod."""
        owners_of: dict[frozenset[int], list[str]] = {}
        for engine, found in self._engine_pids.items():
            owners_of.setdefault(found.listeners, []).append(engine)
        names = {}
        for listeners, engines in owners_of.items():
            if len(engines) != 1:
                continue
            for pid in sorted(listeners):
                name = pod_name_of(pid)
                if name:
                    names[engines[0]] = name
                    break
        return names

    def _log_changes(self, gpus: Sequence[GpuRef], result: Sequence[Mapping[str, str]]) -> None:
        by_engine: dict[str, list[str]] = {}
        for gpu, labels in zip(gpus, result):
            for engine in labels.get("engine", "").split(","):
                if engine:
                    by_engine.setdefault(engine, []).append(gpu.index)
        for engine in set(by_engine) | set(self._logged):
            indexes = tuple(by_engine.get(engine, ()))
            if self._logged.get(engine) != indexes:
                log.info("gpu attribution: engine %s uses GPU(s) %s", engine, ", ".join(indexes) or "none")
                self._logged[engine] = indexes
