"""Benchmark: our RDMA collection beside node_exporter's infiniband scrape, on one tree, in one run.

The tree is the budget node's (docs/performance.md): 8 mlx5 RoCE devices x 1 port, each port with
all 21 counters/ files and all 31 port hw_counters/ files (tests/sysfs_trees.bench_tree), whose
data and packet counters grow before every round, as a busy port's do. Figures:

- ours: `RdmaSource.collect` (read + map + windows), wall and CPU time per collection, and the
  reading alone (`read_infiniband_class` of the files the source uses);
- node_exporter: its own `node_scrape_collector_duration_seconds{collector="infiniband"}` (the
  collector alone) and the wall time of a whole HTTP scrape with only that collector enabled.

On a real host every counters/ read is a MAD to the firmware, which costs both sides the same; on a
tmpfs tree the figures compare the userspace work. node_exporter 1.5 (Debian) does not read
hw_counters at all: every scrape it reads a port's 21 counters/ files, its state, phys_state and
rate, and the device's fw_ver, board_id and hca_type. We read the 42 files the mapping uses on a
full read, every `FULL_READ_EVERY`-th collection, and the state and 12 fast-moving counters in
between: the budget compares the mean cost per
collection, full and fast reads together, with node_exporter's mean. The two are timed in turn,
round by round, so a change in machine load hits both.

    python tests/perf/bench_rdma.py [--devices N] [--rounds N]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from exporter.sources.rdma import FULL_READ_EVERY, WANTED_FILES, RdmaSource  # noqa: E402
from exporter.sysfs.infiniband import read_infiniband_class  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402
from tests.support import free_port  # noqa: E402
from tests.sysfs_trees import LiveTree, bench_tree  # noqa: E402

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"


def timed(function, rounds: int) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


def describe(label: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return (
        f"{label:<52} mean {statistics.fmean(seconds) * 1e3:7.3f} ms   "
        f"median {statistics.median(seconds) * 1e3:7.3f} ms   p99 {p99 * 1e3:7.3f} ms"
    )


class NodeExporter:
    """node_exporter with only its infiniband collector, on the same tree."""

    def __init__(self, tree: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.process = subprocess.Popen(
            [
                NODE_EXPORTER,
                f"--path.sysfs={tree}",
                "--collector.disable-defaults",
                "--collector.infiniband",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.session = requests.Session()
        deadline = time.monotonic() + 20
        while True:
            try:
                if self.session.get(self.url, timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("node_exporter did not start")
            time.sleep(0.05)

    def scrape(self) -> tuple[float, float, int]:
        """(its own infiniband collector duration, whole scrape wall time, node_infiniband_* samples)."""
        start = time.perf_counter()
        text = self.session.get(self.url, timeout=10).text
        wall = time.perf_counter() - start
        collector = math.nan
        for line in text.splitlines():
            if line.startswith('node_scrape_collector_duration_seconds{collector="infiniband"}'):
                collector = float(line.rsplit(" ", 1)[1])
        return collector, wall, sum(1 for line in text.splitlines() if line.startswith("node_infiniband_"))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def grow(live: LiveTree, devices: int, step: int) -> None:
    """The counters a busy port moves between two collections (outside the timed part)."""
    for index in range(devices):
        for counter, per_step in (
            ("counters/port_xmit_data", 25_000_000),
            ("counters/port_rcv_data", 24_000_000),
            ("counters/port_xmit_packets", 90_000),
            ("counters/port_rcv_packets", 88_000),
        ):
            live.add(f"mlx5_{index}", counter, per_step + step % 7)


def bench(tree: Path, rounds: int, devices: int) -> None:
    """Ours and node_exporter's, interleaved round by round, so changes in machine load hit both."""
    files = sum(len(files) for _, _, files in os.walk(tree / "class" / "infiniband"))
    source = RdmaSource(str(tree), window_seconds=60)
    first = len(source.collect(0.0))
    node = NodeExporter(tree) if os.access(NODE_EXPORTER, os.X_OK) else None
    if node is None:
        print(f"node_exporter: {NODE_EXPORTER} not installed (apt-get install prometheus-node-exporter)")
    walls, cpus, reads, theirs, their_walls, series = [], [], [], [], [], 0
    try:
        live = LiveTree(tree)
        for index in range(rounds):
            grow(live, devices, index)
            wall, cpu = time.perf_counter(), time.process_time()
            source.collect(5.0 * (index + 1))
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            wall = time.perf_counter()
            read_infiniband_class(str(tree), WANTED_FILES)
            reads.append(time.perf_counter() - wall)
            if node is not None:
                collector, scrape_wall, series = node.scrape()
                theirs.append(collector)
                their_walls.append(scrape_wall)
    finally:
        if node is not None:
            node.close()
    print(
        f"tree: {tree} ({files} files); ours exports {len(source.collect(1e9))} samples "
        f"({first} on the first collection, before windows exist)"
    )
    print(describe("ours: RdmaSource.collect, wall", walls))
    # the first collection (index 0 of `source`) was full: so are those whose count is a multiple
    full = [w for i, w in enumerate(walls) if (i + 1) % FULL_READ_EVERY == 0]
    fast = [w for i, w in enumerate(walls) if (i + 1) % FULL_READ_EVERY != 0]
    print(describe(f"ours: full reads (1 in {FULL_READ_EVERY}), wall", full))
    print(describe("ours: fast reads, wall", fast))
    print(describe("ours: RdmaSource.collect, CPU", cpus))
    print(describe("ours: read_infiniband_class alone, wall", reads))
    if node is not None:
        print(f"node_exporter exports {series} node_infiniband_* samples")
        print(describe("node_exporter: infiniband collector (its own timing)", theirs))
        print(describe("node_exporter: whole HTTP scrape, wall", their_walls))
        ratio = statistics.fmean(walls) / statistics.fmean(theirs)
        verdict = "holds" if ratio <= 1.0 else "MISSED"
        median_ratio = statistics.median(walls) / statistics.median(theirs)
        print(f"ours / node_exporter's collector, median wall: {median_ratio:.2f} (a fast read's)")
        print(f"ours / node_exporter's collector, mean wall per collection: {ratio:.2f}; budget <= 1: {verdict}")
    print_rows(
        "bench_rdma",
        [
            Row(
                f"RDMA collection of {devices} ports, mean wall per collection (full and fast reads)",
                statistics.fmean(walls) * 1e3,
                "ms",
                statistics.fmean(theirs) * 1e3 if node is not None else None,
                "≤ 1× node_exporter's infiniband collector",
                None if node is None else statistics.fmean(walls) <= statistics.fmean(theirs),
            )
        ],
        "node_exporter's infiniband collector (its own timing), on the same tree, round by round",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rdma-") as directory:
        tree = bench_tree(Path(directory), args.devices)
        print(f"{args.devices} devices x 1 port, {args.rounds} rounds each")
        bench(tree, args.rounds, args.devices)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
