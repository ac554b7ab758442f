"""Take one bounded profile through the engine's own endpoint and find the trace it wrote.

vLLM (0.13+, 0.32 here) serves `POST /start_profile` and `/stop_profile` only when it was launched
with `--profiler-config '{"profiler": "torch", "torch_profiler_dir": "/abs/dir"}'` (before 0.13,
`VLLM_TORCH_PROFILER_DIR`); otherwise the routes are absent (404), and the capture stops there with
what to change. vLLM writes its traces to its own directory: it is read from the engine process'
command line or environment (the process listening on the engine's port) unless given. SGLang
takes the directory and a step count in the request (`output_dir`, `num_steps`) and stops itself.
The engine's profiler is costly while on: the capture is bounded (`seconds`, at most MAX_SECONDS).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psutil

from exporter.engine_processes import EngineProcesses
from exporter.profile.summary import TraceSummary, is_frontend_trace, summarize_capture
from exporter.settings import MAX_PROFILE_SECONDS, EngineTarget
from exporter.sources import event_loop
from exporter.sources.http_fetch import HttpClient

MAX_SECONDS = MAX_PROFILE_SECONDS
#: the index of captures in a trace directory (`profile` and automatic captures append to it)
INDEX = "captures.jsonl"
#: how long the engine may take to write its trace after it stopped (vLLM warns a large model's
#: flush takes minutes; a small one's seconds)
FLUSH_SECONDS = 600.0
#: the most engine steps vLLM profiles (`max_iterations` of /start_profile, its own bound): the
#: trace, and the minutes vLLM takes to flush it, stay bounded even if the stop never arrives
MAX_ITERATIONS = 200
TRACE_PATTERNS = ("*.pt.trace.json.gz", "*.pt.trace.json", "*.trace.json.gz", "*.trace.json")
VLLM_HINT = (
    'launch vLLM with --profiler-config \'{"profiler": "torch", "torch_profiler_dir": "/abs/dir"}\' '
    "(VLLM_TORCH_PROFILER_DIR before 0.13); never by default: the profiler is costly while on"
)


class ProfilingOff(Exception):
    """The engine was not launched with profiling on (or cannot be profiled this way)."""


@dataclass
class Capture:
    engine: str
    started_at: float
    seconds: float
    directory: str
    traces: list[str] = field(default_factory=list)
    summary: TraceSummary | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "started_at": self.started_at,
            "seconds": round(self.seconds, 2),
            "directory": self.directory,
            "traces": self.traces,
            "summary": self.summary.as_json() if self.summary else None,
        }


def base_url(metrics_url: str) -> str:
    parts = urlsplit(metrics_url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def vllm_trace_dir(target: EngineTarget) -> str | None:
    """The engine process' `torch_profiler_dir` (its command line) or VLLM_TORCH_PROFILER_DIR."""
    for found in EngineProcesses([target]).lookup().values():
        for pid in sorted(found.tree):
            try:
                process = psutil.Process(pid)
                args, env = process.cmdline(), process.environ()
            except psutil.Error:
                continue
            for index, arg in enumerate(args):
                text = arg.split("=", 1)[1] if arg.startswith("--profiler-config=") else None
                if arg == "--profiler-config" and index + 1 < len(args):
                    text = args[index + 1]
                if text:
                    try:
                        directory = json.loads(text).get("torch_profiler_dir")
                    except (ValueError, AttributeError):
                        directory = None
                    if directory:
                        return str(directory)
            if env.get("VLLM_TORCH_PROFILER_DIR"):
                return env["VLLM_TORCH_PROFILER_DIR"]
    return None


def take(
    target: EngineTarget,
    seconds: float,
    directory: str | None = None,
    around: Callable[[], AbstractContextManager[Any]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Capture:
    """One capture of `seconds` (bounded by MAX_SECONDS); ProfilingOff when the engine cannot.

    `around`: a context manager held from before the engine starts profiling until its trace is
    written (DCGM's profiling paused: the engine's CUPTI trace needs the counters it holds); held
    that long because SGLang stops by itself after its steps, with no call to wait on. vLLM's stop
    is sent even when `sleep` raises (the exporter stopping), so its profiler is not left on."""
    seconds = max(0.5, min(seconds, MAX_SECONDS))
    kind = target.type or "vllm"
    if kind not in ("vllm", "sglang"):
        raise ProfilingOff(f"{target.name}: {kind} has no profiling endpoint the exporter can call")
    directory = directory or (vllm_trace_dir(target) if kind == "vllm" else "/tmp/llm-bottleneck-exporter-profiles")
    if kind == "vllm" and directory is None:
        directory = ""  # the routes answer 404 when no profiler is configured: that is what is said
    base = base_url(target.url)
    started = time.time()
    with contextlib.ExitStack() as held:
        if around is not None:
            held.enter_context(around())
        client = held.enter_context(contextlib.closing(HttpClient(follow_redirects=False)))
        if kind == "vllm":
            _post(client, f"{base}/start_profile", {"max_iterations": MAX_ITERATIONS}, target.name)
            try:
                sleep(seconds)
            finally:
                _post(client, f"{base}/stop_profile", None, target.name)
        else:
            steps = max(1, round(seconds * 10))  # ~10 steps a second of decode; a bound, not a duration
            body = {"output_dir": directory, "num_steps": steps, "activities": ["CPU", "GPU"]}
            _post(client, f"{base}/start_profile", body, target.name)
        if not directory:
            raise ProfilingOff(f"{target.name}: started, but no trace directory is known: pass --trace-dir")
        traces = wait_for_traces(directory, started, sleep)
    capture = Capture(target.name, started, seconds, directory, [str(p) for p in traces])
    capture.summary = summarize_capture(traces)
    return capture


def record(capture: Capture, **context: Any) -> None:
    """Append the capture to `captures.jsonl` beside its traces, with `context` (what started an
    automatic one): the directory keeps its own history of what each trace was taken for."""
    with open(os.path.join(capture.directory, INDEX), "a", encoding="utf-8") as index:
        index.write(json.dumps({**capture.as_json(), **context}) + "\n")


def _post(client: HttpClient, url: str, body: dict[str, Any] | None, engine: str) -> None:
    async def send() -> tuple[int, str]:
        async with asyncio.timeout(FLUSH_SECONDS):
            response = await client.send("POST", url, {}, json_body=body)
            try:
                return response.status, (await response.text())[:300]
            finally:
                response.release()

    try:
        status, text = event_loop.run(send())
    except TimeoutError:
        raise ProfilingOff(
            f"{engine}: {url} did not answer within {FLUSH_SECONDS:g}s (a trace still flushing)"
        ) from None
    if status in (404, 405):
        raise ProfilingOff(
            f"{engine}: {url} answers {status}: the engine was not launched with profiling on; {VLLM_HINT}"
        )
    if status >= 400:
        raise ProfilingOff(f"{engine}: {url} answers {status}: {text}")


def wait_for_traces(directory: str, since: float, sleep: Callable[[float], None] = time.sleep) -> list[Path]:
    """The traces written into `directory` since `since`, once their sizes stop changing; newest first."""
    deadline = time.monotonic() + FLUSH_SECONDS
    sizes: dict[str, int] = {}
    while time.monotonic() < deadline:
        found = sorted(
            {p for pattern in TRACE_PATTERNS for p in glob.glob(os.path.join(directory, "**", pattern), recursive=True)
             if os.path.getmtime(p) >= since - 1},
            key=os.path.getmtime,
            reverse=True,
        )  # fmt: skip
        now = {p: os.path.getsize(p) for p in found}
        # vLLM's API server writes a trace of its own (Python functions only), and which process
        # flushes first is a race: the engine's is what was asked for, so it is waited for too.
        if found and now == sizes and not all(is_frontend_trace(Path(p)) for p in found):
            return [Path(p) for p in found]
        sizes = now
        sleep(1.0)
    return [Path(p) for p in sizes]
