"""Each round, the node's findings: every registered kind's check over the round's view, and the
engines' starts; as `llm_health_finding` gauges and as evidence for the diagnosis (whose
states.py makes an engine's start `loading` or `warming_up`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import exporter.health.kinds  # noqa: F401 - registers every kind
from exporter.health.finding import Finding
from exporter.health.record import counter_horizons, kinds
from exporter.health.startup import EngineStarts, Startup
from exporter.health.view import CounterHistory, build_view
from exporter.model import Metric, Sample
from exporter.settings import HealthSettings

log = logging.getLogger(__name__)


@dataclass
class HealthRound:
    findings: list[Finding] = field(default_factory=list)
    #: per engine name: its start-up figures, whether it is loading or cold
    startups: dict[str, Startup] = field(default_factory=dict)
    gauges: list[Metric] = field(default_factory=list)

    def report(self) -> list[dict[str, Any]]:
        return [f.as_json() for f in self.findings]


class NodeHealth:
    def __init__(self, settings: HealthSettings | None = None) -> None:
        self.settings = settings or HealthSettings()
        self._counters = CounterHistory(counter_horizons())
        self._starts = EngineStarts()
        self._logged: set[tuple[str, str]] = set()
        self.latest = HealthRound()

    def update(self, metrics: Sequence[Metric], now: float, wall: float) -> HealthRound:
        view = build_view(metrics, now, self._counters)
        found: list[Finding] = []
        for kind in kinds():
            try:
                found += kind.check(view, self.settings)
            except Exception:  # one faulty check costs its own findings, never the round
                log.exception("health check %s failed", kind.id)
        startups = self._starts.update(view, wall, self.settings)
        for startup in startups.values():
            found += startup.findings
        self._log_changes(found)
        gauges: list[Metric] = [
            Sample("llm_health_finding", {"kind": f.kind, "device": f.device, "source": f.source}, f.value)
            for f in found
        ]
        for name, startup in startups.items():
            gauges += startup.gauges(view.engines[name].labels if name in view.engines else {"engine": name})
        self.latest = HealthRound(found, startups, gauges)
        return self.latest

    def _log_changes(self, found: list[Finding]) -> None:
        now = {(f.kind, f.device) for f in found}
        for f in found:
            if (f.kind, f.device) not in self._logged:
                log.warning("health: %s: %s", f.kind, f.line())
        for kind, device in self._logged - now:
            log.info("health: %s on %s cleared", kind, device)
        self._logged = now
