"""One exporter per node of a simulated cluster, in this process, read through its ordinary sources.

As `ExporterView` does for one node (exporter_view.py): each node is served on its own loopback
port (not in real time: the caller advances the cluster) and collected by its own `Exporter`, so
every node's /metrics is what `serve` would publish there. Benchmarks (tests/perf/
bench_cluster_scale.py) and the cluster diagnosis tests read a cluster through it.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


class LiveClusterView:
    """The cluster on the wall clock, each node's latest /metrics served on its own loopback port.

    A thread advances one node at a time to the wall clock and re-collects it, so counters move as
    they would while the CPU stays bounded however many nodes there are (a node's body is as old
    as one pass over the cluster). For a Prometheus over many in-process exporters (the
    VictoriaMetrics test, bench_cluster_scale.py)."""

    def __init__(self, cluster: SimulatedCluster, interval: float) -> None:
        self.cluster = cluster
        self.view = ClusterView(cluster, interval)
        self.bodies = self.view.collect_text()
        self.servers = [self._serve(hostname) for hostname in self.view.hostnames]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._refresh, name="live-cluster", daemon=True)
        self._thread.start()

    def _serve(self, hostname: str) -> ThreadingHTTPServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                body = owner.bodies[hostname]
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, name=f"live-{hostname}", daemon=True).start()
        return server

    def _refresh(self) -> None:
        origin_wall, origin_sim = time.monotonic(), self.cluster.now
        while not self._stop.is_set():
            for node, view in zip(self.cluster.nodes, self.view.views):
                if self._stop.is_set():
                    return
                node.advance(origin_sim + time.monotonic() - origin_wall)
                body = render_text(view.collect())
                if not self._stop.is_set():
                    self.bodies = {**self.bodies, node.hostname: body}
            self._stop.wait(1.0)

    def targets(self) -> dict[str, str]:
        """host:port of each node's /metrics, by hostname."""
        return {h: f"127.0.0.1:{s.server_address[1]}" for h, s in zip(self.view.hostnames, self.servers)}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=300)  # a collection in flight finishes before its sysfs tree goes
        for server in self.servers:
            server.shutdown()
            server.server_close()
        self.view.close()
