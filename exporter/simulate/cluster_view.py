"""One exporter per node of a simulated cluster, in this process, read through its ordinary sources.

As `ExporterView` does for one node (exporter_view.py): each node is served on its own loopback
port (not in real time: the caller advances the cluster) and collected by its own `Exporter`, so
every node's /metrics is what `serve` would publish there. Benchmarks (tests/perf/
bench_cluster_scale.py) and the cluster diagnosis tests read a cluster through it.
"""

from __future__ import annotations

from exporter.exposition import render_text
from exporter.loop import Snapshot
from exporter.simulate.cluster import SimulatedCluster
from exporter.simulate.exporter_view import ExporterView


class ClusterView:
    def __init__(self, cluster: SimulatedCluster, interval: float = 5.0) -> None:
        self.cluster = cluster
        self.views: list[ExporterView] = []
        try:
            for node in cluster.nodes:
                self.views.append(ExporterView(node, interval))
        except BaseException:
            self.close()
            raise

    @property
    def hostnames(self) -> list[str]:
        return [node.hostname for node in self.cluster.nodes]

    def collect(self) -> dict[str, Snapshot]:
        """Every node's snapshot after one collection, by hostname."""
        return {node.hostname: view.collect() for node, view in zip(self.cluster.nodes, self.views)}

    def collect_text(self) -> dict[str, bytes]:
        """Every node's /metrics body (text format 0.0.4) after one collection, by hostname."""
        return {hostname: render_text(snapshot) for hostname, snapshot in self.collect().items()}

    def close(self) -> None:
        for view in self.views:
            view.close()
        self.views = []
