"""What a Chrome/Kineto trace (the `*.pt.trace.json.gz` vLLM and SGLang write through the PyTorch
profiler) says: the operators or kernels that took the time, and the shares of communication,
copies and compute.

Time is self time: an event's duration less that of the events nested inside it on the same thread
(a CPU operator calls others), so nothing is counted twice. GPU kernels (`cat` kernel) are what a
GPU trace is about; a CPU-only trace (vLLM on CPU) is summarized by its CPU operators.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_COMMUNICATION = re.compile(r"nccl|all_?reduce|all_?gather|reduce_?scatter|broadcast|all_to_all|c10d|send|recv", re.I)
_COPY = re.compile(r"memcpy|memset|aten::copy_|aten::_to_copy|aten::to\b|Memcpy|Memset", re.I)
_GPU = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
_CPU = frozenset({"cpu_op", "user_annotation", "Operator"})


@dataclass
class TraceSummary:
    path: str
    events: int
    #: "gpu kernels" or "cpu operators": what the shares are of
    basis: str
    total_seconds: float
    top: list[tuple[str, float]] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "events": self.events,
            "basis": self.basis,
            "total_seconds": round(self.total_seconds, 6),
            "top": [{"name": name, "seconds": round(seconds, 6)} for name, seconds in self.top],
            "shares": {k: round(v, 4) for k, v in self.shares.items()},
        }

    def lines(self) -> list[str]:
        shares = ", ".join(f"{kind} {share:.0%}" for kind, share in self.shares.items())
        out = [f"{self.path}: {self.events} events, {self.total_seconds * 1000:.1f} ms of {self.basis} ({shares})"]
        out += [f"  {seconds * 1000:9.2f} ms  {name}" for name, seconds in self.top]
        return out


def load_trace(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        document = json.load(handle)
    return document if isinstance(document, dict) else {"traceEvents": document}


def summarize(path: Path, top: int = 10) -> TraceSummary:
    events = [e for e in load_trace(path).get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    gpu = [e for e in events if e.get("cat") in _GPU]
    chosen = gpu or [e for e in events if e.get("cat") in _CPU]
    self_times = _self_times(chosen)
    by_name: dict[str, float] = defaultdict(float)
    shares: dict[str, float] = {"communication": 0.0, "copies": 0.0, "compute": 0.0}
    for event, seconds in self_times:
        name = str(event.get("name", "?"))
        by_name[name] += seconds
        kind = "copies" if event.get("cat") in ("gpu_memcpy", "gpu_memset") or _COPY.search(name) else None
        kind = kind or ("communication" if _COMMUNICATION.search(name) else "compute")
        shares[kind] += seconds
    total = sum(shares.values())
    ranked = sorted(by_name.items(), key=lambda item: -item[1])[:top]
    return TraceSummary(
        str(path),
        len(events),
        "gpu kernels" if gpu else "cpu operators",
        total,
        ranked,
        {kind: (value / total if total else 0.0) for kind, value in shares.items()},
    )


def is_frontend_trace(path: Path) -> bool:
    """vLLM's API server's trace (`HOST_PID.async_llm.*`), not an engine worker's."""
    return ".async_llm." in path.name


def summarize_capture(paths: Sequence[Path], top: int = 10) -> TraceSummary | None:
    """The summary of a capture's engine trace: the first of its traces with kernels or operators.

    vLLM (0.32) writes one trace per worker rank (`rank0.*`: the operators and kernels) and, its
    frontend profiled by default, one for its API server process (`HOST_PID.async_llm.*`) holding
    Python functions only. Which is flushed last is a race, so the newest is not the one to read;
    the frontend's is read last (it is as large as a worker's and never has what is summarized)."""
    first: TraceSummary | None = None
    for path in sorted(paths, key=is_frontend_trace):
        summary = summarize(path, top)
        if summary.top:
            return summary
        first = first or summary
    return first


def _self_times(events: list[dict[str, Any]]) -> list[tuple[dict[str, Any], float]]:
    """(event, self seconds) per event: its duration less its children's on the same thread."""
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_thread[(event.get("pid"), event.get("tid"))].append(event)
    out = []
    for thread in by_thread.values():
        thread.sort(key=lambda e: (float(e.get("ts", 0)), -float(e.get("dur", 0))))
        stack: list[list[Any]] = []  # [event, end, children's time]
        for event in thread:
            start, duration = float(event.get("ts", 0)), float(event.get("dur", 0))
            while stack and stack[-1][1] <= start:
                done = stack.pop()
                out.append((done[0], max(0.0, float(done[0].get("dur", 0)) - done[2]) / 1e6))
            if stack:
                stack[-1][2] += duration
            stack.append([event, start + duration, 0.0])
        while stack:
            done = stack.pop()
            out.append((done[0], max(0.0, float(done[0].get("dur", 0)) - done[2]) / 1e6))
    return out
