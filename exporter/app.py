"""The composition root: the one place that builds the exporter from its configuration.

`Exporter` owns the sources (through the registry below), the collection loop, the diagnoser, the
rendered snapshot that `/metrics` serves, self-observability and reload. `serve`, `once`, the
simulator's exporter view and the tests all build the exporter through it, so a snapshot is
enriched in one place (`Exporter.publish`): engine process samples joined to their engine's
labels, reload counters added, diagnosis gauges computed.

node_exporter's `main` is the model: it builds the enabled collectors from the flags and hands
them to one handler; no collector sees the flag set, and nothing else wires the pieces.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from exporter.attribution import Attributor
from exporter.budget import SeriesBudget
from exporter.diagnosis import Diagnoser
from exporter.exposition import RenderedSnapshot
from exporter.health.evaluate import NodeHealth
from exporter.loop import CollectionLoop, Snapshot
from exporter.model import Metric, Sample
from exporter.otlp_listener import OtlpHTTPServer
from exporter.profile.auto import AutoProfiler, CaptureFunction
from exporter.profile.capture import take
from exporter.settings import Config, EngineTarget
from exporter.slo.monitor import SloMonitor
from exporter.slo.otlp import RequestStore, SpanSink
from exporter.slo.points import PathLayout
from exporter.slo.requests import from_spans
from exporter.sources.base import Source, SourceGroup
from exporter.sources.dcgm import DcgmSource
from exporter.sources.engine import EngineSource
from exporter.sources.gateway import GatewaySource
from exporter.sources.gpu import build_gpu_source
from exporter.sources.host import HostSource
from exporter.sources.node import NODE_SOURCES, NodeContext
from exporter.sources.planner import PlannerSource
from exporter.sources.probe import ProbeSource
from exporter.sources.rdma import RdmaSource
from exporter.validation import ConfigError
from exporter.webguard import WebGuard

log = logging.getLogger(__name__)

PROCESS_FAMILIES = ("llm_engine_process_cpu_seconds_total", "llm_engine_process_threads")
#: host-read families labelled by `engine` alone, joined like the process families; the start time
#: gives way to the engine's own where it exports one
HOST_ENGINE_FAMILIES = (
    "llm_engine_process_start_time_seconds",
    "llm_engine_cgroup_cpu_periods_total",
    "llm_engine_cgroup_cpu_throttled_periods_total",
    "llm_engine_cgroup_cpu_throttled_seconds_total",
)
#: what may change on reload only with a restart (bound at start-up)
FIXED_AT_START = ("listen_host", "listen_port", "web_config_file", "otlp")


@dataclasses.dataclass
class Pipeline:
    """What one configuration builds: the fixed sources and the groups found at run time."""

    sources: list[Source]
    groups: list[SourceGroup]
    #: every engine now, configured and discovered (the OTLP receiver admits spans from their addresses)
    targets: Callable[[], Sequence[EngineTarget]] = lambda: ()

    def close(self) -> None:
        closers: list[Callable[[], None]] = [s.close for s in self.sources] + [g.close for g in self.groups]
        for close in closers:
            try:
                close()
            except Exception:
                log.exception("closing %r", close)


def build_pipeline(config: Config, lifetime_baseline: bool = False) -> Pipeline:
    """The enabled sources (node_exporter's collector registry): one per engine target, GPUs,
    RDMA ports when the node has them, the host; engines discovered from Kubernetes pod
    annotations as a group, started so the first collection has them.

    `lifetime_baseline` (for `once`): no earlier reading to diff against, so windows count the
    engines' and counters' lifetimes instead.
    """
    groups: list[SourceGroup] = []
    discovery = None
    if config.kubernetes.enabled:
        from exporter.discovery.kubernetes import KubernetesEngineDiscovery

        discovery = KubernetesEngineDiscovery(config.kubernetes, config.window_seconds, lifetime_baseline)
        discovery.start()
        log.info("kubernetes: discovering annotated engine pods on node %s", discovery.node_name)
        groups.append(discovery)
    configured = config.engines

    def targets() -> Sequence[EngineTarget]:
        """Every engine now, configured and discovered: process CPU and GPU attribution for both."""
        return (*configured, *discovery.engines.targets()) if discovery is not None else configured

    sources: list[Source] = [EngineSource(target, config.window_seconds, lifetime_baseline) for target in configured]
    try:
        pod_at = discovery.pod_at if discovery is not None else None
        attributor = Attributor(config.gpu_attribution, targets, pod_at=pod_at)
        gpu_source = build_gpu_source(config.gpu, attributor, config.interval_seconds)
    except BaseException:
        Pipeline(sources, groups, targets).close()
        raise
    if gpu_source is not None:
        sources.append(gpu_source)
    if os.path.isdir(os.path.join(config.sysfs, "class", "infiniband")):
        sources.append(RdmaSource(config.sysfs, config.window_seconds))
    else:
        log.info("rdma: no %s/class/infiniband; RDMA families are absent", config.sysfs)

    def reporting_own_cpu() -> set[str]:
        """Engines (configured or discovered) whose last scrape carried their process CPU."""
        found = [*sources, *(member for group in groups for member in group.sources())]
        return {s.target for s in found if isinstance(s, EngineSource) and s.reports_process_cpu}

    sources.append(HostSource(targets, config.window_seconds, lifetime_baseline, reporting_own_cpu=reporting_own_cpu))
    node = NodeContext(config.sysfs, config.health, targets)
    sources += [source for entry in NODE_SOURCES.values() if (source := entry.build(node)) is not None]
    sources += [GatewaySource(target, config.window_seconds, lifetime_baseline) for target in config.gateways]
    if not lifetime_baseline:  # `once` has no time to probe: probes run in `serve` only
        sources += [ProbeSource(probe, config.window_seconds) for probe in config.probes]
    sources += [PlannerSource(target) for target in config.planners]
    return Pipeline(sources, groups, targets)


def join_process_samples(metrics: Sequence[Metric]) -> list[Metric]:
    """Give the host source's process samples (labelled by `engine` alone) the label sets of that
    engine's own series, so they join; drop them for an engine that exports its own process CPU
    (one series per engine, never two)."""
    engine_labels: dict[str, list[dict[str, str]]] = {}
    reports_own: set[tuple[str, str]] = set()
    joined = (*PROCESS_FAMILIES, *HOST_ENGINE_FAMILIES)
    for metric in metrics:
        if metric.name == "llm_engine_up":
            engine_labels.setdefault(metric.labels["engine"], []).append(dict(metric.labels))
        elif metric.name in joined and "engine_type" in metric.labels:
            reports_own.add((metric.name, metric.labels["engine"]))
    out: list[Metric] = []
    for metric in metrics:
        if metric.name not in joined or "engine_type" in metric.labels:
            out.append(metric)
            continue
        engine = metric.labels["engine"]
        own = PROCESS_FAMILIES[0] if metric.name in PROCESS_FAMILIES else metric.name
        if (own, engine) in reports_own:
            continue
        assert isinstance(metric, Sample)
        for labels in engine_labels.get(engine) or [{"engine": engine, "engine_type": "unknown", "model": ""}]:
            out.append(Sample(metric.name, labels, metric.value))
    return out


class Exporter:
    """Sources, loop, diagnosis and the served snapshot for one configuration, and its reloads."""

    def __init__(
        self,
        config: Config,
        *,
        lifetime_baseline: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        pipeline: Pipeline | None = None,
        profile_capture: CaptureFunction = take,
    ) -> None:
        """`clock`: the collection loop's and the windows' time; `wall_clock`: the Unix time that
        engines' start times are read against (a simulation served faster than real time gives
        its own, so that an engine's start is as long ago as the simulation says);
        `profile_capture`: how an automatic profile is taken (the engine's endpoint; tests fake it)."""
        self.config = config
        self.rendered = RenderedSnapshot()
        self.diagnoser = Diagnoser(config.thresholds, warm_up=not lifetime_baseline)
        self.diagnoser.path.configure(config.gateways, config.probes)
        self.node_health = NodeHealth(config.health)  # links, fabric configuration, starts, host pauses
        # OTLP request spans (opt-in), admitted within the engines' own label bounds
        limits = config.engine_defaults
        self.spans = (
            SpanSink(config.otlp, limits.max_label_value_length, limits.max_models, clock)
            if config.otlp.listen
            else None
        )
        self.otlp: OtlpHTTPServer | None = None
        store = self.spans.store if self.spans else None
        self.slo = self._slo_monitor(config, store)  # attainment, goodput, headroom, decisions
        self.reloads = {"success": 0, "failure": 0}
        self.series_budget = SeriesBudget()  # the node-wide output cap, applied in publish
        # automatic profiles when a stage holds (opt-in), DCGM's profiling paused around each
        self.profiler = AutoProfiler(config.profile, self._gpu_counters_released, profile_capture, clock, wall_clock)
        self._clock = clock
        self._wall_clock = wall_clock
        self._lifetime_baseline = lifetime_baseline
        self._lock = threading.Lock()
        pipeline = pipeline or build_pipeline(config, lifetime_baseline)
        self._targets = pipeline.targets
        if self.spans is not None:  # bound at start-up like the listen address
            try:
                self.otlp = start_otlp(config, self.spans)
            except BaseException:
                pipeline.close()
                raise
        self.loop = self._make_loop(pipeline, config)
        self.latest: Snapshot | None = None

    # -- collection ----------------------------------------------------------------------------

    def collect_once(self) -> Snapshot:
        """One collection now, published; for `once`, the simulator's offline view and tests."""
        self.loop.collect_once()
        assert self.latest is not None
        return self.latest

    def publish(self, snapshot: Snapshot) -> None:
        """Enrich a completed collection (the one place that does) and serve it."""
        counts = tuple(
            Sample("llm_exporter_config_reloads_total", {"result": result}, float(count))
            for result, count in self.reloads.items()
        )
        metrics = (*join_process_samples(snapshot.metrics), *counts, *self.profiler.metrics())
        if snapshot.complete:  # a partial first-round snapshot (exporter.loop) is neither judged nor diagnosed
            if self.spans is not None:  # the engines spans may name, from their own series
                self.spans.observe(metrics, self._targets(), self.config.window_seconds)
            metrics = (*metrics, *self.slo.update(metrics, self._clock()))
            answered = {target: at for (name, target), at in snapshot.answered_at.items() if name == EngineSource.name}
            health = self.node_health.update(metrics, self._clock(), self._wall_clock())
            failures = {
                s.target: (s.error, s.message) for s in snapshot.statuses if s.source == EngineSource.name and not s.up
            }
            diagnosed = self.diagnoser.update(
                metrics,
                self._clock(),
                notes=self.slo.evidence,
                answered_at=answered,
                failures=failures,
                actions=self.slo.actions,
                findings=health.findings,
                starts=health.startups,
            )
            metrics = (*metrics, *health.gauges, *diagnosed)
            if not self._lifetime_baseline:  # `once` has no time for a capture
                verdicts = ((key[0], d.primary) for key, d in sorted(self.diagnoser.latest.items()))
                self.profiler.observe(verdicts, self._targets)
        # Span-made series last: what a client sends never pushes an engine's own series out.
        limit = self.config.max_exported_series
        kept, error_counts = self.series_budget.apply(metrics, snapshot.error_counts, limit, last=from_spans)
        enriched = dataclasses.replace(snapshot, metrics=tuple(kept), error_counts=error_counts)
        self.latest = enriched
        self.rendered.publish(enriched)

    def diagnosis(self) -> dict[str, Any]:
        """The /diagnosis document: the diagnosis, the node's health findings, each engine's
        start-up and its last automatic profile, and the SLOs' measuring points and decisions."""
        document = self.diagnoser.report()
        health = self.node_health.latest
        document["node"]["findings"] = health.report()
        for engine in document["engines"]:
            startup = health.startups.get(engine["engine"])
            if startup is not None:
                engine["startup"] = startup.as_json()
            profiled = self.profiler.record_of(engine["engine"])
            if profiled is not None:
                engine["profile"] = profiled.as_json()
        return {**document, "slo": self.slo.report()}

    @staticmethod
    def _slo_monitor(config: Config, store: RequestStore | None) -> SloMonitor:
        return SloMonitor(config.slos, config.window_seconds, store, config.capacity, config.gateways, config.probes)

    # -- running -------------------------------------------------------------------------------

    def start(self) -> None:
        self.loop.start()

    def _gpu_counters_released(self) -> AbstractContextManager[Any]:
        """Held while an engine is profiled: DCGM's profiling paused where this exporter reads
        DCGM itself (dcgm-exporter's DCGM is another process's, not this one's to pause)."""
        dcgm = next((s for s in self.loop.current_sources() if isinstance(s, DcgmSource)), None)
        return dcgm.profiling_paused() if dcgm is not None else nullcontext()

    def stop(self) -> None:
        self.profiler.stop()  # a capture in flight is not waited on
        self.loop.stop()
        if self.otlp is not None:
            self.otlp.close()
            self.otlp = None

    def health(self) -> tuple[bool, str]:
        """Ready once the first collection completed; healthy while the loop runs and has
        completed a round recently (3 intervals plus the slowest source's timeout)."""
        loop = self.loop
        if not loop.is_alive():
            return False, "collection loop not running"
        completed = loop.last_completed_monotonic
        if completed is None:
            # Not ready before a complete collection: a scrape now would find no engine series,
            # and a rollout that trusted it would replace a working pod with a blind one.
            return False, "first collection in progress"
        max_timeout = max((s.deadline_seconds() for s in loop.current_sources()), default=0.0)
        max_age = 3 * self.config.interval_seconds + max_timeout + 5
        age = time.monotonic() - completed
        if age > max_age:
            return False, f"no completed collection for {age:.0f}s"
        return True, "ok"

    def reload(self, new: Config) -> bool:
        """Apply a new configuration: rebuild the sources and swap the loop. A configuration that
        fails to build keeps the running one (logged, counted); what is bound at start-up (the
        listen address, the web config file) is reported and kept."""
        fixed = [key for key in FIXED_AT_START if getattr(new, key) != getattr(self.config, key)]
        if fixed:
            log.warning(
                "reload: %s cannot change without a restart; keeping %s",
                ", ".join(fixed),
                ", ".join(f"{k}={getattr(self.config, k)}" for k in fixed),
            )
            new = dataclasses.replace(new, **{k: getattr(self.config, k) for k in fixed})
        try:
            pipeline = build_pipeline(new, self._lifetime_baseline)
        except ConfigError as exc:
            self.reloads["failure"] += 1
            log.error("reload failed, keeping the running configuration: %s", exc)
            return False
        except Exception as exc:  # e.g. a GPU library that fails to start: same promise
            self.reloads["failure"] += 1
            log.error("reload failed, keeping the running configuration: %r", exc)
            return False
        self.reloads["success"] += 1
        with self._lock:
            old = self.loop
            new_loop = self._make_loop(pipeline, new)
            # Error counts carry over so llm_exporter_source_errors_total does not reset.
            new_loop.inherit_error_counts(old)
            old.stop()
            self._targets = pipeline.targets
            self.config = new
            self.diagnoser.thresholds = new.thresholds
            self.node_health.settings = new.health
            self.profiler.settings = new.profile
            self.diagnoser.path.configure(new.gateways, new.probes)
            if not self.slo.same_settings(new.slos, new.window_seconds, new.capacity):
                self.slo = self._slo_monitor(new, self.slo.requests)
            self.slo.layout = PathLayout.of(new.gateways, new.probes)
            self.loop = new_loop
            new_loop.start()
        log.info("reloaded the configuration: %d source(s), interval %gs", len(pipeline.sources), new.interval_seconds)
        return True

    def fail_reload(self, exc: ConfigError) -> None:
        """A configuration that could not even be read (SIGHUP with a broken file)."""
        self.reloads["failure"] += 1
        log.error("reload failed, keeping the running configuration: %s", exc)

    def _make_loop(self, pipeline: Pipeline, config: Config) -> CollectionLoop:
        return CollectionLoop(
            pipeline.sources,
            config.interval_seconds,
            on_snapshot=self.publish,
            clock=self._clock,
            groups=pipeline.groups,
        )


def start_otlp(config: Config, sink: SpanSink) -> OtlpHTTPServer:
    """The receiver behind its web config (its own, else the one `/metrics` has)."""
    path = config.otlp.web_config_file or config.web_config_file
    web = WebGuard(path) if path else None
    try:
        server = OtlpHTTPServer(config.otlp, sink, web)
    except OSError as exc:
        raise ConfigError("otlp.listen", f"cannot listen on {config.otlp.listen}: {exc.strerror or exc}") from exc
    return server.start()
