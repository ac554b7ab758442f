"""Reading the exporter (and the engine) while a real vLLM runs under load.

A `View` is one scrape of the exporter's /metrics with the time it was read; `Sampler` keeps them
in the background while a load runs (`BackgroundLoad`, `RepeatingLoad`); the rest compares them
with the client's own timings (tests/integration/loadgen.py) and with the engine's histograms.
Used by test_vllm_exporter.py.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.loadgen import WORKER_THREAD_PREFIX, LoadResult, LoadSpec, RequestRecord, run_load
from tests.support import REQUEST_BOUND_SECONDS, ExporterProcess

TTFT = "llm_engine_time_to_first_token_seconds"
POLL_S = 0.2


def _engine_series(name: str) -> property:
    """A View attribute: the vLLM engine's value of `name`, None when not exported."""
    return property(lambda view: view.engine(name))


@dataclasses.dataclass(frozen=True)
class View:
    """One scrape of the exporter's /metrics: when it was read (time.time()) and its samples."""

    at: float
    samples: tuple[tuple[str, dict[str, str], float], ...]

    @classmethod
    def parse(cls, text: str, at: float) -> View:
        samples = tuple(
            (s.name, dict(s.labels), float(s.value))
            for family in text_string_to_metric_families(text)
            for s in family.samples
        )
        return cls(at, samples)

    def value(self, name: str, **labels: str) -> float | None:
        for sample_name, sample_labels, value in self.samples:
            if sample_name == name and all(sample_labels.get(k) == v for k, v in labels.items()):
                return value
        return None

    def engine(self, name: str, **labels: str) -> float | None:
        return self.value(name, engine_type="vllm", **labels)

    up = _engine_series("llm_engine_up")
    running = _engine_series("llm_engine_requests_running")
    waiting = _engine_series("llm_engine_requests_waiting")
    kv = _engine_series("llm_engine_kv_cache_usage_ratio")
    preemptions = _engine_series("llm_engine_preemptions_total")
    prompt_tokens = _engine_series("llm_engine_prompt_tokens_total")
    generation_tokens = _engine_series("llm_engine_generation_tokens_total")
    prefix_ratio = _engine_series("llm_engine_prefix_cache_hit_ratio")
    queue_time_sum = _engine_series("llm_engine_queue_time_seconds_sum")

    def ttft(self, q: float) -> float | None:
        return self.engine(TTFT, quantile=repr(q))

    def ttft_count(self) -> float | None:
        return self.engine(f"{TTFT}_count")

    def summary(self) -> str:
        return (
            f"up={self.up} running={self.running} waiting={self.waiting} kv={self.kv} "
            f"preemptions={self.preemptions} ttft_p50={self.ttft(0.5)} prefix_ratio={self.prefix_ratio} "
            f"engine_collect_s={self.value('llm_exporter_collect_duration_seconds', source='engine')}"
        )


def history(views: list[View], last: int = 40) -> str:
    """The last views, one line each, for failure messages."""
    return "\n".join(
        f"{time.strftime('%H:%M:%S', time.localtime(v.at))}{f'{v.at % 1:.2f}'[1:]} {v.summary()}" for v in views[-last:]
    )


def scrape(exporter: ExporterProcess) -> View:
    return View.parse(exporter.metrics(), time.time())


def wait_view(exporter: ExporterProcess, predicate: Callable[[View], bool], timeout_s: float, what: str) -> View:
    """Poll /metrics until `predicate` holds; fail with the last view and the exporter log."""
    deadline = time.monotonic() + timeout_s
    views: list[View] = []
    failures: list[str] = []
    while True:
        try:
            views.append(scrape(exporter))
            if predicate(views[-1]):
                return views[-1]
        except requests.RequestException as error:
            failures.append(f"{time.strftime('%H:%M:%S')} {type(error).__name__}: {error}")
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"{what}: not within {timeout_s:.0f}s; views:\n{history(views) or '<no scrape>'}\n"
                f"failed scrapes ({len(failures)}): {failures[-3:]}\n{exporter.log()}"
            )
        time.sleep(POLL_S)


def diagnosis(exporter: ExporterProcess) -> tuple[str, dict[str, Any] | None]:
    """(generated_at, the vLLM engine's /diagnosis entry or None when the engine is not listed)."""
    document = requests.get(exporter.base_url + "/diagnosis", timeout=REQUEST_BOUND_SECONDS).json()
    entries = [e for e in document["engines"] if e["engine_type"] == "vllm"]
    return document["generated_at"], entries[0] if entries else None


def wait_collections(exporter: ExporterProcess, count: int, timeout_s: float = 30.0) -> None:
    """Wait until the exporter published `count` more snapshots (each diagnosis is stamped)."""
    seen = {diagnosis(exporter)[0]}
    deadline = time.monotonic() + timeout_s
    while len(seen) <= count:
        assert time.monotonic() < deadline, f"exporter published no new snapshot within {timeout_s:.0f}s"
        time.sleep(POLL_S)
        seen.add(diagnosis(exporter)[0])


class _Periodic:
    """`read_once` run over and over, `period_s` apart, in a background thread while the `with`
    block runs."""

    thread_name = "periodic-reader"

    def __init__(self, period_s: float, join_timeout_s: float = 30.0) -> None:
        self.period_s = period_s
        self.join_timeout_s = join_timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def __enter__(self):  # noqa: ANN204 - the subclass
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=self.join_timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.read_once()
            self._stop.wait(self.period_s)

    def read_once(self) -> None:
        raise NotImplementedError


class Sampler(_Periodic):
    """Scrapes the exporter in the background while a load runs, keeping every view."""

    thread_name = "exporter-sampler"

    def __init__(self, exporter: ExporterProcess, period_s: float = 0.5) -> None:
        self.exporter = exporter
        self.views: list[View] = []
        self.errors: list[str] = []
        super().__init__(period_s)

    def read_once(self) -> None:
        try:
            self.views.append(scrape(self.exporter))
        except requests.RequestException as error:
            self.errors.append(f"{time.time():.1f}: {error}")

    def between(self, start: float, end: float) -> list[View]:
        return [v for v in self.views if start <= v.at <= end]


class BackgroundLoad:
    """run_load in a thread; `started`/`ended` are time.time()."""

    def __init__(self, base_url: str, spec: LoadSpec) -> None:
        self.spec = spec
        self.result: LoadResult | None = None
        self.finished: list[RequestRecord] = []  # grows while the load runs (list.append is atomic)
        self.started = time.time()
        self.ended: float | None = None
        self._thread = threading.Thread(target=self._run, args=(base_url,), name="load", daemon=True)
        self._thread.start()

    def _run(self, base_url: str) -> None:
        try:
            self.result = run_load(base_url, self.spec, on_record=self.finished.append)
        finally:
            self.ended = time.time()

    def describe(self) -> str:
        """Where the load stands, for a failure message: its finished requests and its workers' stacks."""
        done = list(self.finished)
        lines = [
            f"load {'running' if self.running else 'ended'} {time.time() - self.started:.1f}s after its start, "
            f"{len(done)} request(s) finished, {sum(not r.ok for r in done)} failed"
        ]
        lines += [f"  {dataclasses.asdict(r)}" for r in done[-5:]]
        frames = sys._current_frames()
        for thread in threading.enumerate():
            if thread.name.startswith(WORKER_THREAD_PREFIX) and thread.ident in frames:
                stack = traceback.format_stack(frames[thread.ident])[-3:]
                lines.append(f"  {thread.name}:\n" + "".join(stack).rstrip())
        return "\n".join(lines)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> LoadResult:
        # run_load is bounded: no request starts after duration_s and each ends within its timeout.
        self._thread.join(timeout=self.spec.duration_s + self.spec.request_timeout_s + 60)
        assert not self._thread.is_alive(), "load generator did not finish"
        assert self.result is not None, "load generator failed"
        return self.result


class RepeatingLoad(_Periodic):
    """Short closed-loop runs, `pause_s` apart, until stopped (for waits of unknown length)."""

    thread_name = "repeating-load"

    def __init__(self, base_url: str, chunk: LoadSpec, pause_s: float = 0.0) -> None:
        self.base_url = base_url
        self.chunk = chunk
        self.results: list[LoadResult] = []
        super().__init__(pause_s, join_timeout_s=chunk.duration_s + chunk.request_timeout_s + 30)

    def read_once(self) -> None:
        self.results.append(run_load(self.base_url, self.chunk))

    @property
    def errors(self) -> int:
        return sum(r.error_count for r in self.results)


def client_ttfts(result: LoadResult, start: float, end: float) -> list[float]:
    """Client TTFTs of the requests whose first token arrived in (start, end] (wall clock)."""
    return [r.ttft_s for r in result.ok_records if r.ttft_s is not None and start < r.started + r.ttft_s <= end]


def nearest_rank(values: list[float], q: float) -> float:
    data = sorted(values)
    if not data:
        return math.nan
    return data[min(len(data) - 1, max(0, math.ceil(q * len(data)) - 1))]


def engine_ttft_buckets(text: str) -> dict[float, float]:
    """The engine's own cumulative TTFT buckets {le: count}, read with prometheus_client."""
    buckets: dict[float, float] = {}
    # Only the bucket lines go to the parser: a whole vLLM page every half second costs the test
    # process CPU that its samplers and clients, on a saturated 2-core machine, lack.
    lines = "\n".join(line for line in text.splitlines() if line.startswith("vllm:time_to_first_token_seconds_bucket"))
    for family in text_string_to_metric_families(lines + "\n"):
        for sample in family.samples:
            if sample.name == "vllm:time_to_first_token_seconds_bucket":
                le = float(sample.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + sample.value
    return buckets


def median_bucket(before: dict[float, float], after: dict[float, float]) -> tuple[float, float, float]:
    """(lower bound, upper bound, count) of the bucket that holds the median of the increase."""
    bounds = sorted(after)
    increase = [after[b] - before.get(b, 0.0) for b in bounds]
    total = increase[-1]
    lower = 0.0
    for bound, count in zip(bounds, increase):
        if count >= total / 2:
            return lower, bound, total
        lower = bound
    return lower, math.inf, total


@dataclasses.dataclass(frozen=True)
class EngineSnapshot:
    """The engine's own TTFT histogram, read directly between `before` and `after` (time.time())."""

    before: float
    after: float
    buckets: dict[float, float]


class EngineSampler(_Periodic):
    """Reads the engine's /metrics in the background while a load runs: the reference that the
    exporter's windowed quantiles are checked against (see window_median_bounds)."""

    thread_name = "engine-sampler"

    def __init__(self, read_metrics: Callable[[], str], period_s: float = 0.5) -> None:
        self.read_metrics = read_metrics
        self.snapshots: list[EngineSnapshot] = []
        super().__init__(period_s)

    def read_once(self) -> None:
        before = time.time()
        try:
            text = self.read_metrics()
        except requests.RequestException:
            return
        self.snapshots.append(EngineSnapshot(before, time.time(), engine_ttft_buckets(text)))

    def wait_first(self, timeout_s: float = 30.0) -> None:
        """Block until one snapshot is in: references need a read from before what they judge."""
        deadline = time.monotonic() + timeout_s
        while not self.snapshots:
            assert time.monotonic() < deadline, f"the engine's /metrics was not read within {timeout_s:g}s"
            time.sleep(0.05)

    def last_read_by(self, moment: float) -> EngineSnapshot | None:
        """The latest snapshot read entirely before `moment`."""
        done = [s for s in self.snapshots if s.after <= moment]
        return done[-1] if done else None

    def first_read_from(self, moment: float) -> EngineSnapshot | None:
        """The earliest snapshot read entirely after `moment`."""
        return next((s for s in self.snapshots if s.before >= moment), None)


def _increase(start: EngineSnapshot, end: EngineSnapshot) -> dict[float, float]:
    return {b: end.buckets[b] - start.buckets.get(b, 0.0) for b in end.buckets}


def window_median_bounds(
    engine: EngineSampler, view: View, window_s: float, lag_s: float, spacing_s: float, read_s: float
) -> tuple[float, float, dict[str, Any]] | None:
    """Bounds (low, high) on the median the exporter may publish for its window at `view`, from the
    engine's own histogram; None when the engine's reads do not reach around the window.

    The exporter's window holds what the engine observed between two of its reads: the last
    collection c_k, read in [view.at - lag_s, view.at], and the collection c_j it expired last,
    stamped in [c_k - window_s - spacing_s, c_k - window_s] and read up to read_s later. The
    engine's increase from a snapshot after c_j to one before c_k ("inner") is then bucket by bucket
    at most the window's, and the increase from one before c_j to one after c_k ("outer") at least.
    So the window's median rank lies between half the inner and half the outer total, and its
    bucket between the first whose outer count reaches the former and the first whose inner count
    reaches the latter: whatever the engine did, however the client saw it. The caller checks the
    lag assumption: the view's count (the engine's at c_k) lies between the two end snapshots'.
    """
    inner_start = engine.first_read_from(view.at - window_s + read_s)
    inner_end = engine.last_read_by(view.at - lag_s)
    outer_start = engine.last_read_by(view.at - lag_s - window_s - spacing_s)
    outer_end = engine.first_read_from(view.at)
    if inner_start is None or inner_end is None or outer_start is None or outer_end is None:
        return None  # the engine was not read early or late enough around this view
    inner, outer = _increase(inner_start, inner_end), _increase(outer_start, outer_end)
    bounds = sorted(outer)
    least_rank, most_rank = inner[math.inf] / 2, outer[math.inf] / 2
    low_bucket = next(i for i, b in enumerate(bounds) if outer[b] >= least_rank)
    high_bucket = next((i for i, b in enumerate(bounds) if inner.get(b, 0.0) >= most_rank), len(bounds) - 1)
    low = bounds[low_bucket - 1] if low_bucket > 0 else 0.0
    evidence = {
        "bounds": tuple(bounds),
        "inner_requests": inner[math.inf],
        "outer_requests": outer[math.inf],
        "engine_count_inner_end": inner_end.buckets[math.inf],
        "engine_count_outer_end": outer_end.buckets[math.inf],
    }
    return low, bounds[high_bucket], evidence


def bucket_upper_bound(bounds: list[float], value: float) -> float:
    """The upper bound of the histogram bucket that holds `value`."""
    return next(b for b in sorted(bounds) if value <= b)


def present(views: list[View], attr: str) -> list[float]:
    return [v for view in views if (v := getattr(view, attr)) is not None]


def errors_of(result: LoadResult) -> list[str]:
    return sorted({r.error or "" for r in result.records if r.error})[:5]


def ttft_entry(view: View, client: list[float]) -> dict[str, Any]:
    return {
        "exporter_ttft_p50_s": view.ttft(0.5),
        "exporter_ttft_p99_s": view.ttft(0.99),
        "client_ttft_p50_s": statistics.median(client) if client else None,
        "client_ttft_p99_s": nearest_rank(client, 0.99) if client else None,
        "client_requests_in_window": len(client),
    }
