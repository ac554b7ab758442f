"""Offline mode: run a scenario faster than real time and return what the exporter would have seen.

Two views of the same run:
- the truth, sampled every `sample_seconds` (running, waiting, KV usage per replica; GPU ratios;
  NIC utilization) plus every request's record, for benchmarks of the model itself;
- optionally (`exporter_view=True`) the exporter's own normalized snapshots: the simulated node is
  served over loopback HTTP (and a sysfs tree in a temporary directory) and read by the exporter's
  ordinary sources, built by its registry, on a collection loop whose clock is the simulated one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from exporter.loop import Snapshot
from exporter.simulate.gpu import GpuActivity
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import Scenario
from exporter.simulate.workload import Request

SUCCESS = ("stop", "length")


@dataclass(frozen=True)
class ReplicaTruth:
    running: int
    waiting: int
    kv_usage: float
    preemptions: int
    cpu_seconds: float  # the engine process's CPU, cumulative


@dataclass(frozen=True)
class TruthSample:
    t: float
    phase: str
    expected_stage: str
    replicas: tuple[ReplicaTruth, ...]
    gpus: tuple[GpuActivity, ...]
    nic_transmit_utilization: tuple[float, ...]


@dataclass(frozen=True)
class WindowSummary:
    """Aggregates over [start, end): latency percentiles by arrival, throughput by completion."""

    start: float
    end: float
    arrivals: int
    completed: int
    e2e_p50: float
    e2e_p99: float
    e2e_mean: float  # by arrival too: with throughput and running it checks Little's law
    ttft_p99: float
    tpot_p50: float  # median per-request time per output token (decode pace)
    requests_per_second: float
    output_tokens_per_second: float
    running: float  # mean per replica
    waiting: float
    waiting_last: float  # per replica, at the window's last sample
    kv_usage: float
    preemptions_per_second: float
    engine_cpu_cores: float  # mean over replicas of the engine process's CPU, in cores
    gpu_utilization: float
    sm_active: float
    dram_active: float
    tensor_active: float
    nic_transmit_utilization: float  # mean over the NICs that carry engine traffic (else all)


@dataclass
class OfflineResult:
    scenario: Scenario
    node: SimulatedNode
    samples: list[TruthSample] = field(default_factory=list)
    snapshots: list[tuple[float, Snapshot]] = field(default_factory=list)

    @property
    def requests(self) -> list[Request]:
        return self.node.finished_requests() + self.node.open_requests()

    def phase_window(self, name: str, settle_seconds: float = 0.0, tail_seconds: float | None = None) -> WindowSummary:
        """The window of a phase, skipping its first `settle_seconds` (or keeping only the last
        `tail_seconds`)."""
        phases = self.scenario.phases
        index = next(i for i, p in enumerate(phases) if p.name == name)
        end = phases[index + 1].start_seconds if index + 1 < len(phases) else self.node.now
        start = phases[index].start_seconds + settle_seconds
        if tail_seconds is not None:
            start = max(start, end - tail_seconds)
        return self.window(start, end)

    def window(self, start: float, end: float) -> WindowSummary:
        now = self.node.now
        arrived = [r for r in self.requests if start <= r.arrival < end and r.finish_reason != "rejected"]
        # Unfinished requests count with the time they have waited so far: a growing queue shows.
        e2e = sorted((r.finished if r.done else now) - r.arrival for r in arrived)
        # An aborted request never gets a first token: it waited until its client gave up, not until now.
        ttft = sorted(
            (r.first_token if r.first_token >= 0 else (r.finished if r.done else now)) - r.arrival for r in arrived
        )
        done = [r for r in self.requests if r.finish_reason in SUCCESS and start <= r.finished < end]
        tpot = sorted((r.finished - r.first_token) / (r.generated - 1) for r in done if r.generated > 1)
        samples = [s for s in self.samples if start < s.t <= end] or self.samples[-1:]
        span = max(end - start, 1e-9)
        replica_samples = [rep for s in samples for rep in s.replicas]
        gpu_samples = [g for s in samples for g, d in zip(s.gpus, self.node.gpus) if d.engine is not None]
        carrying_ids = {id(port) for replica in self.node.replicas for port in replica.ports}
        carrying = [i for i, port in enumerate(self.node.ports) if id(port) in carrying_ids]
        nic = [
            s.nic_transmit_utilization[i] for s in samples for i in (carrying or range(len(s.nic_transmit_utilization)))
        ]
        first, last = samples[0], samples[-1]
        return WindowSummary(
            start=start,
            end=end,
            arrivals=len(arrived),
            completed=len(done),
            e2e_p50=_quantile(e2e, 0.5),
            e2e_p99=_quantile(e2e, 0.99),
            e2e_mean=_mean(e2e),
            ttft_p99=_quantile(ttft, 0.99),
            tpot_p50=_quantile(tpot, 0.5),
            requests_per_second=len(done) / span,
            output_tokens_per_second=sum(r.generated for r in done) / span,
            running=_mean(r.running for r in replica_samples),
            waiting=_mean(r.waiting for r in replica_samples),
            waiting_last=_mean(r.waiting for r in last.replicas),
            kv_usage=_mean(r.kv_usage for r in replica_samples),
            preemptions_per_second=(
                sum(r.preemptions for r in last.replicas) - sum(r.preemptions for r in first.replicas)
            )
            / max(last.t - first.t, 1e-9),
            engine_cpu_cores=(sum(r.cpu_seconds for r in last.replicas) - sum(r.cpu_seconds for r in first.replicas))
            / max(last.t - first.t, 1e-9)
            / max(1, len(last.replicas)),
            gpu_utilization=_mean(g.utilization for g in gpu_samples),
            sm_active=_mean(g.sm_active for g in gpu_samples),
            dram_active=_mean(g.dram_active for g in gpu_samples),
            tensor_active=_mean(g.tensor_active for g in gpu_samples),
            nic_transmit_utilization=_mean(nic),
        )


def run_offline(
    scenario: Scenario,
    seed: int | None = None,
    duration_seconds: float | None = None,
    sample_seconds: float = 5.0,
    drain: bool = False,
    exporter_view: bool = False,
    exporter_settings: dict[str, Any] | None = None,
    plain_flags: bool = False,
) -> OfflineResult:
    """Simulate `scenario` for `duration_seconds` (default: the scenario's) as fast as the CPU allows;
    `exporter_settings` adds configuration keys (such as `slos:`) to the exporter view's, and
    `plain_flags` reads the node as `serve` with plain CLI flags does (ExporterView)."""
    node = SimulatedNode(scenario, seed, record_requests=True)
    result = OfflineResult(scenario, node)
    duration = scenario.duration_seconds if duration_seconds is None else duration_seconds
    reader = None
    if exporter_view:
        from exporter.simulate.exporter_view import ExporterView

        reader = ExporterView(node, extra_settings=exporter_settings, plain_flags=plain_flags)
    try:
        t = 0.0
        while t < duration - 1e-9:
            t = min(duration, t + sample_seconds)
            node.advance(t)
            result.samples.append(truth_sample(node, sample_seconds))
            if reader is not None:
                result.snapshots.append((node.now, reader.collect()))
        if drain:
            node.drain()
            result.samples.append(truth_sample(node, sample_seconds))
    finally:
        if reader is not None:
            reader.close()
    return result


def truth_sample(node: SimulatedNode, window: float) -> TruthSample:
    phase = node.phase
    return TruthSample(
        t=node.now,
        phase=phase.name,
        expected_stage=phase.expected_stage,
        replicas=tuple(
            ReplicaTruth(len(r.running), len(r.waiting), r.kv.usage, r.stats.preemptions, r.stats.cpu_seconds)
            for r in node.replicas
        ),
        gpus=tuple(g.activity(node.now, window) for g in node.gpus),
        nic_transmit_utilization=tuple(_nic_utilization(node, i, window) for i in range(len(node.ports))),
    )


def _nic_utilization(node: SimulatedNode, index: int, window: float) -> float:
    port = node.ports[index]
    history = node.nic_history[index]
    if not history:
        return 0.0
    t0, words0 = history[0]
    for t, words in reversed(history):
        if t <= node.now - window:
            t0, words0 = t, words
            break
    span = node.now - t0
    if span <= 0:
        return 0.0
    return min(1.0, (port.values["port_xmit_data"] - words0) * 4 / span / port.spec.rate_bytes_per_second)


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    index = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
    return values[index]


def _mean(values) -> float:  # noqa: ANN001 - any iterable of numbers
    items = list(values)
    return sum(items) / len(items) if items else math.nan
