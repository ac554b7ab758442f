"""atheris: arbitrary contents in a real RDMA sysfs tree, through the RDMA source.

The trees are the upstream captures (procfs and node_exporter fixtures) and a RoCE mlx5 port with
hw_counters. Each input picks a tree, then up to eight of its files and what becomes of each (new
bytes, removed, or made unreadable the way a failing driver read is); the source collects before
and after, so rates, wraps and resets are exercised. Files are put back after every input.
Properties: tests/fuzz/properties.py.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["exporter"]):
    from exporter.sources.rdma import RdmaSource

from tests.fuzz.harness import run  # noqa: E402
from tests.fuzz.properties import FILE_FATES, assert_renders_and_parses_back, change_file, collect  # noqa: E402
from tests.sysfs_trees import build_fixture_tree, roce_mlx5_tree  # noqa: E402

#: where the trees are built: libFuzzer ends the process with C's exit(), past Python's cleanup,
#: so a caller that wants nothing left behind names a folder of its own (the CI test does)
_BASE = Path(os.environ.get("SYSFS_FUZZER_DIR") or tempfile.mkdtemp(prefix="sysfs-fuzzer-"))
TREES = [
    build_fixture_tree(_BASE / "procfs", "procfs"),
    build_fixture_tree(_BASE / "node_exporter", "node_exporter"),
    roce_mlx5_tree(_BASE / "roce"),
]
FILES = [sorted(p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()) for tree in TREES]
ORIGINAL = {path: path.read_bytes() for files in FILES for path in files}


def _restore(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.write_bytes(ORIGINAL[path])


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    which = fdp.ConsumeIntInRange(0, len(TREES) - 1)
    tree, files = TREES[which], FILES[which]
    source = RdmaSource(str(tree), 60.0)
    touched: set[Path] = set()
    try:
        metrics, statuses = [], []
        for now in (0.0, 5.0):
            for _ in range(fdp.ConsumeIntInRange(0, 8)):
                path = files[fdp.ConsumeIntInRange(0, len(files) - 1)]
                touched.add(path)
                fate = FILE_FATES[fdp.ConsumeIntInRange(0, len(FILE_FATES) - 1)]
                change_file(path, fate, fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 64)))
            metrics, status = collect(source, now)
            statuses = [status]
        assert_renders_and_parses_back(metrics, statuses)
    finally:
        for path in touched:
            _restore(path)


if __name__ == "__main__":
    try:
        run(test_one_input)
    finally:
        shutil.rmtree(_BASE, ignore_errors=True)
