"""The trace summary: self time per operator or kernel, nested events counted once, and the shares
of communication, copies and compute; a GPU trace is summarized by its kernels."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from exporter.profile.summary import summarize, summarize_capture


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


def test_a_capture_is_summarized_by_its_engine_trace_not_by_the_frontend_trace_flushed_last(tmp_path: Path) -> None:
    """vLLM writes its API server's trace (Python functions only) beside the worker's; either may be
    the newest. Neither the newest nor the first listed decides: the trace with operators does."""
    frontend = write(tmp_path / "vm_7.async_llm.2.pt.trace.json.gz", [op("_worker", 0, 9000, cat="python_function")])
    other = write(tmp_path / "api.3.pt.trace.json.gz", [op("run", 0, 5000, cat="python_function")])
    worker = write(tmp_path / "rank0.1.pt.trace.json.gz", [op("aten::mm", 0, 400), op("aten::add", 500, 100)])
    summary = summarize_capture([frontend, other, worker])
    assert summary is not None and summary.path == str(worker)
    assert [name for name, _ in summary.top] == ["aten::mm", "aten::add"]
    empty = summarize_capture([other])
    assert empty is not None and empty.path == str(other) and empty.top == []
    assert summarize_capture([]) is None
