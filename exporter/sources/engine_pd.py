"""One engine target's role and KV hand-over, as the `llm_kv_transfer_*` families (catalogue/disagg.py).

The engine source (engine.py) reads the engine's own families; this part reads the connector's
(exporter/sources/engines/kv_transfer.py), keeps the engine's role (engines/roles.py) and turns
cumulative figures into the window's: latency quantiles from the histogram's bucket increases,
the bytes moved per second, and the speed a transfer achieves, recomputed as bytes over transfer
time. What the engine does not export is left out, so the diagnosis can say it is unmeasured.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Iterator, Mapping

from exporter.catalogue import QUANTILES
from exporter.model import EngineReading, Metric, QuantileSummary, Sample
from exporter.promtext import ParsedSamples
from exporter.sources.engines import kv_transfer
from exporter.sources.engines.kv_transfer import KvTransferReading
from exporter.sources.engines.roles import UNIFIED, Role, RoleTracker
from exporter.window import DeltaWindow, histogram_vector, observed, windowed_summary

Labels = Mapping[str, str]


class EngineHandOver:
    """The hand-over state of one engine target: its role, and windows over its connector figures."""

    def __init__(self, declared_role: str | None, role_source: str, window_seconds: float, lifetime: bool) -> None:
        self.tracker = RoleTracker(declared_role, role_source, window_seconds)
        self._window_seconds = window_seconds
        self._lifetime = lifetime
        #: windows over the connector's cumulative figures, by (model, connector, what)
        self._windows: dict[tuple[str, str, str], DeltaWindow] = {}
        #: a last-value latency gauge's values as scraped (SGLang before its histograms)
        self._samples: dict[tuple[str, str], deque[tuple[float, float]]] = {}
        self._sample_totals: dict[tuple[str, str], tuple[int, float]] = {}
        self.readings: dict[str, list[KvTransferReading]] = {}

    @staticmethod
    def wanted(engine_type: str) -> frozenset[str]:
        return kv_transfer.wanted(engine_type)

    @property
    def role(self) -> Role:
        return self.tracker.role

    def role_labels(self) -> dict[str, str]:
        """The `role` label an engine's series carry: none on a unified engine."""
        return {} if self.role.role == UNIFIED else {"role": self.role.role}

    def read(
        self,
        engine_type: str,
        parsed: ParsedSamples,
        duplicate_labels: frozenset[str],
        engine: Iterable[EngineReading],
        now: float,
    ) -> None:
        engine = list(engine)
        self.readings = kv_transfer.read(engine_type, parsed, duplicate_labels)
        transfers = [t for readings in self.readings.values() for t in readings]
        self.tracker.update(engine_type, parsed, engine, transfers, now)
        if self.role.role == "decode":
            self._parked_for_kv(engine)

    def _parked_for_kv(self, engine: Iterable[EngineReading]) -> None:
        """A decode worker's requests waiting for remote KV where the engine has no gauge of its
        own for them: vLLM without `num_requests_kv_fetch_by_stage` parks them in its `deferred`
        waiting reason (`requests_waiting_deferred`, read by the engine's mapping). That reason
        also holds requests over the LoRA budget, so it is read as pending transfers only once the
        worker is known to decode, and never decides the role."""
        for reading in engine:
            deferred = reading.requests_waiting_deferred
            if deferred is None:
                continue
            transfers = self.readings.setdefault(reading.model, [])
            if not transfers:  # a connector without families of its own (vLLM's ExampleConnector)
                transfers.append(KvTransferReading(""))
            transfers[0].pending.setdefault("receiver", deferred)

    def metrics(self, now: float, model: str, labels: Labels) -> Iterator[Metric]:
        """The model's hand-over families; `labels` are the engine's (role included)."""
        if self.role.role != UNIFIED:
            yield Sample("llm_engine_role_info", {**labels, "source": self.role.source}, 1.0)
        for reading in self.readings.get(model, ()):
            own = {**labels, "connector": reading.connector} if reading.connector else dict(labels)
            yield from self._transfer(now, model, own, reading)

    def forget(self, models: set[str]) -> None:
        for key in [k for k in self._windows if k[0] not in models]:
            del self._windows[key]
        for gone in [k for k in self._samples if k[0] not in models]:
            del self._samples[gone]
            self._sample_totals.pop(gone, None)

    def _observe(
        self, key: tuple[str, str, str], now: float, values: tuple[float, ...], shape: object = None
    ) -> DeltaWindow:
        return observed(self._windows, key, self._window_seconds, self._lifetime, now, values, shape)

    # -------------------------------------------------------------------------------- families
    def _transfer(self, now: float, model: str, labels: Labels, reading: KvTransferReading) -> Iterator[Metric]:
        connector = reading.connector
        if reading.latency is not None:
            latency = reading.latency
            window = self._observe((model, connector, "latency"), now, histogram_vector(latency), latency.bounds)
            yield windowed_summary("llm_kv_transfer_seconds", labels, latency, window, QUANTILES)
        elif reading.last_latency_seconds is not None:
            yield self._sampled(now, (model, connector), labels, reading.last_latency_seconds)
        for family, value in (
            ("llm_kv_transfer_bytes_total", reading.bytes_total),
            ("llm_kv_transfer_transfers_total", reading.transfers_total),
            ("llm_kv_transfer_expired_total", reading.expired_total),
            ("llm_kv_transfer_retries_total", reading.retries_total),
        ):
            if _countable(value):
                yield Sample(family, labels, float(value))  # type: ignore[arg-type]
        for kind, value in sorted(reading.failures.items()):
            if _countable(value):
                yield Sample("llm_kv_transfer_failures_total", {**labels, "kind": kind}, value)
        for side, value in sorted(reading.pending.items()):
            if _countable(value):
                yield Sample("llm_kv_transfer_pending_requests", {**labels, "side": side}, value)
        if _countable(reading.bytes_total):
            window = self._observe((model, connector, "bytes"), now, (reading.bytes_total,))  # type: ignore[arg-type]
            moved, span = window.total(), window.span()
            if moved is not None and span > 0:
                yield Sample("llm_kv_transfer_bytes_per_second", labels, moved[0] / span)
            if _countable(reading.seconds_total):
                pair = (reading.bytes_total, reading.seconds_total)
                totals = self._observe((model, connector, "speed"), now, pair).total()  # type: ignore[arg-type]
                if totals is not None and totals[1] > 0:
                    yield Sample("llm_kv_transfer_speed_bytes_per_second", labels, totals[0] / totals[1])

    def _sampled(self, now: float, key: tuple[str, str], labels: Labels, value: float) -> Metric:
        """Quantiles over the values a last-value gauge showed at each scrape of the window."""
        samples = self._samples.setdefault(key, deque())
        samples.append((now, value))
        while samples and samples[0][0] <= now - self._window_seconds:
            samples.popleft()
        count, total = self._sample_totals.get(key, (0, 0.0))
        self._sample_totals[key] = (count + 1, total + value)
        ordered = sorted(v for _, v in samples)
        quantiles = tuple((q, ordered[min(len(ordered) - 1, int(q * len(ordered)))]) for q in QUANTILES)
        return QuantileSummary("llm_kv_transfer_seconds", labels, quantiles, count + 1, total + value)


def _countable(value: float | None) -> bool:
    """A figure the engine exports that can be true: present, finite and not negative."""
    return value is not None and math.isfinite(value) and value >= 0
