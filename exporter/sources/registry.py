"""Build the enabled sources from the configuration (node_exporter's collector registry)."""

from __future__ import annotations

import logging
import os

from exporter.config import Config
from exporter.loop import SourceGroup
from exporter.sources.base import Source
from exporter.sources.engine import EngineSource, EngineTarget
from exporter.sources.gpu import build_gpu_source
from exporter.sources.host import HostSource
from exporter.sources.rdma import RdmaSource

log = logging.getLogger(__name__)


def build_sources(config: Config, lifetime_baseline: bool = False) -> list[Source]:
    """One source per engine target, plus the node-level sources this build has."""
    sources: list[Source] = [
        EngineSource(target, config.window_seconds, lifetime_baseline) for target in config.engines
    ]
    gpu_source = build_gpu_source(config)
    if gpu_source is not None:
        sources.append(gpu_source)
    if os.path.isdir(os.path.join(config.sysfs, "class", "infiniband")):
        sources.append(RdmaSource(config.sysfs, config.window_seconds))
    else:
        log.info("rdma: no %s/class/infiniband; RDMA families are absent", config.sysfs)
    # Process samples carry the label sets the engine source gives its own series, so they join.
    # An engine that exports its own process CPU is not measured twice (one series per engine).
    engine_by_name = {source.target: source for source in sources if isinstance(source, EngineSource)}

    def labels_for(target: EngineTarget) -> list[dict[str, str]]:
        engine = engine_by_name[target.name]
        return [] if engine.reports_process_cpu else [dict(m.labels) for m in engine.down_metrics()]

    sources.append(HostSource(config.engines, config.window_seconds, lifetime_baseline, labels_for=labels_for))
    return sources


def build_source_groups(config: Config, lifetime_baseline: bool = False) -> list[SourceGroup]:
    """Sources found at run time: engines discovered from Kubernetes pod annotations, started
    (one list of the node's pods now, then a watch thread) so the first collection has them."""
    groups: list[SourceGroup] = []
    if config.kubernetes.enabled:
        from exporter.discovery.kubernetes import KubernetesEngineDiscovery

        discovery = KubernetesEngineDiscovery(config.kubernetes, config.window_seconds, lifetime_baseline)
        discovery.start()
        log.info("kubernetes: discovering annotated engine pods on node %s", discovery.node_name)
        groups.append(discovery)
    return groups
