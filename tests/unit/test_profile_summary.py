"""The trace summary: self time per operator or kernel, nested events counted once, and the shares
of communication, copies and compute; a GPU trace is summarized by its kernels."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from exporter.profile.summary import summarize


def write(path: Path, events: list[dict]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        json.dump({"traceEvents": events}, handle)
    return path


def op(name: str, ts: float, dur: float, cat: str = "cpu_op", tid: int = 1) -> dict:
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": 1, "tid": tid}


def test_cpu_operators_by_self_time(tmp_path: Path) -> None:
    trace = write(tmp_path / "t.pt.trace.json.gz", [
        op("aten::linear", 0, 1000), op("aten::matmul", 100, 800),  # linear's own time: 200 us
        op("aten::copy_", 2000, 300), op("aten::linear", 3000, 500, tid=2),
        {"ph": "i", "name": "marker", "ts": 1}, op("python_fn", 0, 10_000, cat="python_function"),
    ])  # fmt: skip
    summary = summarize(trace)
    assert summary.basis == "cpu operators" and summary.events == 5
    assert summary.top == [
        ("aten::matmul", pytest.approx(800e-6)),
        ("aten::linear", pytest.approx(700e-6)),
        ("aten::copy_", pytest.approx(300e-6)),
    ]
    assert summary.shares["copies"] == pytest.approx(300 / 1800) and summary.shares["communication"] == 0


def test_a_gpu_trace_is_read_by_its_kernels_with_communication_and_copies(tmp_path: Path) -> None:
    trace = write(tmp_path / "g.json.gz", [
        op("aten::mm", 0, 5000), op("sm90_xmma_gemm_bf16", 0, 600, cat="kernel", tid=7),
        op("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 700, 300, cat="kernel", tid=7),
        op("Memcpy HtoD (Pageable -> Device)", 1100, 100, cat="gpu_memcpy", tid=8),
    ])  # fmt: skip
    summary = summarize(trace)
    assert summary.basis == "gpu kernels" and summary.top[0][0] == "sm90_xmma_gemm_bf16"
    assert summary.shares == {"communication": pytest.approx(0.3), "copies": pytest.approx(0.1),
                              "compute": pytest.approx(0.6)}  # fmt: skip
