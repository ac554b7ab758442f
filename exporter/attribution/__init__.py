"""Which engine uses which GPU: the labels that tie `llm_gpu_*` series to `llm_engine_*` series.

Three methods, the first that names an engine for a GPU wins:
1. the static map of the configuration (`gpu_attribution.static`);
2. processes: the engine's listening port → its PID → its process tree, intersected with the PIDs
   NVML reports on each GPU;
3. Kubernetes: the kubelet pod-resources API says which pod holds each GPU; the engine's pod comes
   from `gpu_attribution.engine_pods` or from the HOSTNAME of the engine's process.
The kubelet's pod/namespace/container are added to a GPU's labels whether or not an engine matched.
Process and pod lookups run at most every `refresh_seconds` (the kubelet rate-limits `List`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from exporter.attribution.podresources import PodContainer, PodResourcesClient, PodResourcesError
from exporter.engine_processes import EngineProcess, EngineProcesses, pod_name_of
from exporter.settings import EngineTarget, GpuAttribution

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
    ) -> None:
        self.settings = settings
        self._processes = processes if processes is not None else EngineProcesses(engines)
        if pod_client is None and settings.pod_resources_socket:
            pod_client = PodResourcesClient(settings.pod_resources_socket)
        self._pods = pod_client
        self._clock = clock
        self._next_refresh = float("-inf")
        self._engine_pids: dict[str, EngineProcess] = {}
        self._pod_devices: dict[str, set[PodContainer]] = {}
        self._pod_error: str | None = None
        self._logged: dict[str, tuple[str, ...]] = {}

    def attribute(self, gpus: Sequence[GpuRef]) -> list[dict[str, str]]:
        """Extra labels for each GPU, in order: `engine`, and `pod`/`namespace`/`container`."""
        self._refresh(any(g.pids for g in gpus))
        engine_of_pod = self._engine_of_pod()
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

    def _engine_of_pod(self) -> dict[tuple[str, str], str]:
        mapping = {pod: engine for engine, pod in self.settings.engine_pods.items()}
        if not self._pod_devices:
            return mapping
        pods_by_name: dict[str, set[tuple[str, str]]] = {}
        for owners in self._pod_devices.values():
            for owner in owners:
                pods_by_name.setdefault(owner.pod, set()).add((owner.namespace, owner.pod))
        for engine, found in self._engine_pids.items():
            if engine in self.settings.engine_pods:
                continue
            for pid in sorted(found.listeners):
                name = pod_name_of(pid)
                candidates = pods_by_name.get(name or "", set())
                if len(candidates) == 1:
                    mapping.setdefault(next(iter(candidates)), engine)
                    break
        return mapping

    # -- lookups -------------------------------------------------------------------------------

    def _refresh(self, have_pids: bool) -> None:
        now = self._clock()
        if now < self._next_refresh:
            return
        self._next_refresh = now + self.settings.refresh_seconds
        pods = self._pods if self._pods is not None and self._pods.available() else None
        wants_processes = self.settings.processes and (have_pids or pods is not None)
        self._engine_pids = self._processes.lookup() if wants_processes else {}
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
