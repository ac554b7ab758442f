"""Benchmark: our RDMA collection beside node_exporter's infiniband scrape, on one tree, in one run.

The tree is DESIGN.md's budget node: 8 mlx5 RoCE devices x 1 port, each port with all 21
counters/ files and all 31 port hw_counters/ files (tests/sysfs_trees.bench_tree). Figures:

- ours: `RdmaSource.collect` (read + map + windows), wall and CPU time per collection, and the
  reading alone (`read_infiniband_class`);
- node_exporter: its own `node_scrape_collector_duration_seconds{collector="infiniband"}` (the
  collector alone) and the wall time of a whole HTTP scrape with only that collector enabled.

On a real host every counters/ read is a MAD to the firmware, which costs both sides the same; on a
tmpfs tree the figures compare the userspace work. node_exporter 1.5 (Debian) does not read
hw_counters at all, so it reads 21 files per port where we read 52.

    python tests/perf/bench_rdma.py [--devices N] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from exporter.sources.rdma import RdmaSource  # noqa: E402
from exporter.sysfs.infiniband import read_infiniband_class  # noqa: E402
from tests.support import free_port  # noqa: E402
from tests.sysfs_trees import bench_tree  # noqa: E402

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
    return f"{label:<52} median {statistics.median(seconds) * 1e3:7.3f} ms   p99 {p99 * 1e3:7.3f} ms"


def bench_ours(tree: Path, rounds: int) -> None:
    files = sum(len(files) for _, _, files in os.walk(tree / "class" / "infiniband"))
    source = RdmaSource(str(tree), window_seconds=60)
    samples = len(source.collect(0.0))
    clock = iter(range(1, 10 * rounds + 10))
    walls, cpus = timed(lambda: source.collect(float(next(clock)) * 5), rounds)
    read_walls, _ = timed(lambda: read_infiniband_class(str(tree)), rounds)
    print(
        f"tree: {tree} ({files} files); ours exports {len(source.collect(1e9))} samples "
        f"({samples} on the first collection, before windows exist)"
    )
    print(describe("ours: RdmaSource.collect, wall", walls))
    print(describe("ours: RdmaSource.collect, CPU", cpus))
    print(describe("ours: read_infiniband_class alone, wall", read_walls))


def bench_node_exporter(tree: Path, rounds: int) -> None:
    if not os.access(NODE_EXPORTER, os.X_OK):
        print(
            f"node_exporter: {NODE_EXPORTER} not installed "
            "(apt-get install -y --no-install-recommends prometheus-node-exporter)"
        )
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    process = subprocess.Popen(
        [
            NODE_EXPORTER,
            f"--path.sysfs={tree}",
            "--collector.disable-defaults",
            "--collector.infiniband",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        session = requests.Session()
        deadline = time.monotonic() + 20
        while True:
            try:
                if session.get(url, timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("node_exporter did not start")
            time.sleep(0.05)
        collector, walls, series = [], [], 0
        for _ in range(rounds):
            start = time.perf_counter()
            text = session.get(url, timeout=10).text
            walls.append(time.perf_counter() - start)
            for line in text.splitlines():
                if line.startswith('node_scrape_collector_duration_seconds{collector="infiniband"}'):
                    collector.append(float(line.rsplit(" ", 1)[1]))
            series = sum(1 for line in text.splitlines() if line.startswith("node_infiniband_"))
        print(f"node_exporter exports {series} node_infiniband_* samples")
        print(describe("node_exporter: infiniband collector (its own timing)", collector))
        print(describe("node_exporter: whole HTTP scrape, wall", walls))
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rdma-") as directory:
        tree = bench_tree(Path(directory), args.devices)
        print(f"{args.devices} devices x 1 port, {args.rounds} rounds each")
        bench_ours(tree, args.rounds)
        bench_node_exporter(tree, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
