"""Bottleneck diagnosis: the framework of DESIGN.md as `llm_bottleneck_*` gauges and a report.

Reads only normalized metrics (exporter/stages/signals.py), scores every engine-scope stage of the
registry (exporter/stages/) from several signals, applies hysteresis so `llm_bottleneck_active`
does not flap (verdict.py), and names one primary stage per engine with the evidence and the
actions worded for its settings. The stages before the engine are scored per gateway (path.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from exporter.diagnosis.path import PathDiagnoser
from exporter.diagnosis.pd import PairDiagnosis, balance_actions, not_judged, pair_evidence, pair_json
from exporter.diagnosis.verdict import NONE, Hysteresis
from exporter.model import Metric, Sample
from exporter.settings import Thresholds, field_names
from exporter.stages import ENGINE, of
from exporter.stages.pd_view import PdView
from exporter.stages.record import StageResult
from exporter.stages.signals import EngineKey, History, capacity_waiting, engine_inputs, engine_key

__all__ = ["Diagnoser", "Thresholds"]


@dataclass
class EngineDiagnosis:
    key: EngineKey
    scores: dict[str, float]
    active: dict[str, bool]
    results: dict[str, StageResult]
    primary: str = NONE
    evidence: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    #: its part of a disaggregated deployment and where that comes from ("" while nothing says)
    role: str = "unified"
    role_source: str = ""
    pd: PdView | None = None

    def as_json(self) -> dict[str, Any]:
        engine, engine_type, model = self.key
        return {
            "engine": engine,
            "engine_type": engine_type,
            "model": model,
            "role": self.role,
            "role_source": self.role_source,
            **({"pair": pair_json(self.pd)} if self.pd is not None else {}),
            "primary": self.primary,
            "scores": {stage: round(score, 3) for stage, score in self.scores.items()},
            "active": [stage for stage, on in self.active.items() if on],
            "evidence": self.evidence,
            "actions": self.actions,
        }


class Diagnoser:
    """Keeps each engine's recent inputs and turns every new snapshot into a diagnosis."""

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self._histories: dict[EngineKey, History] = {}
        self._last_seen: dict[EngineKey, float] = {}
        self._hysteresis = Hysteresis()
        self.latest: dict[EngineKey, EngineDiagnosis] = {}
        self.generated_at: float = time.time()
        #: the stages before the engine, per gateway
        self.path = PathDiagnoser()
        #: disaggregated pairs across the node's engines (pd.py)
        self.pairs = PairDiagnosis()

    def update(
        self,
        metrics: Sequence[Metric],
        now: float,
        notes: Mapping[EngineKey, Sequence[str]] | None = None,
        answered_at: Mapping[str, float] | None = None,
    ) -> list[Metric]:
        """Diagnose every live engine in `metrics` (monotonic `now`); return the gauges. `notes`:
        evidence lines from outside the stages (the SLOs' attainment and headroom), per engine.
        `answered_at`: per `engine` label, when that engine's answer was read (same clock), where
        the collection knows it. Each engine's point is stamped then, not at `now`: on a busy host
        a round lasts as long as its slowest source, and an answer that missed its round's
        deadline is published a round later, so stamping all at `now` put seconds of error into
        every counter rate over a 30 s level window (a counter at 0.95 cores read 0.81 with one
        round in four 4.3 s long: tests/unit/test_diagnosis.py)."""
        t = self.thresholds
        inputs = engine_inputs(metrics)
        for engine_inputs_ in inputs.values():
            capacity_waiting(engine_inputs_)
        answered = answered_at or {}
        for key, engine in inputs.items():
            history = self._histories.setdefault(key, History(max(t.baseline_seconds, t.level_seconds * 2)))
            at = min(now, answered.get(key[0], now))
            if history.points:  # a point never goes before the one it follows
                at = max(at, history.points[-1][0])
            history.add(at, engine)
            self._last_seen[key] = now
        # An engine missing from one collection (a scrape that timed out on a busy host) keeps its
        # history and hysteresis: dropping them would restart its ITL baseline in the middle of an
        # incident, where the slowed tokens become "its best" and decode bandwidth can no longer show.
        # Only an engine down for longer than the level window twice over is forgotten; one whose
        # source is gone (a removed target, a deleted pod: no `llm_engine_up` at all) goes at once.
        forget_before = now - 2 * t.level_seconds
        down = {
            engine_key(m.labels) for m in metrics if m.name == "llm_engine_up" and isinstance(m, Sample) and not m.value
        }
        for key in [
            k for k in self._histories if k not in inputs and (k not in down or self._last_seen[k] < forget_before)
        ]:
            del self._histories[key]
            del self._last_seen[key]
            self._hysteresis.forget(key)
        pair_metrics = self.pairs.update(self._histories, inputs.keys(), metrics, t)
        # An engine within its grace keeps its last verdict (and its row in /diagnosis) rather
        # than vanishing for one collection.
        previous = self.latest
        self.latest = {key: self._diagnose(key, self._histories[key]) for key in inputs}
        for key, lines in (notes or {}).items():
            if key in self.latest:
                self.latest[key].evidence.extend(lines)
        for key in self._histories:
            if key not in self.latest and key in previous:
                self.latest[key] = previous[key]
        self.generated_at = time.time()
        gauges = [m for d in self.latest.values() for m in self._gauges(d)]
        return gauges + pair_metrics + self.path.update(metrics, now, t)

    def report(self) -> dict[str, Any]:
        """The /diagnosis document (DESIGN.md contract)."""
        engines = [d.as_json() for _, d in sorted(self.latest.items())]
        counts: dict[str, int] = {}
        for d in self.latest.values():
            counts[d.primary] = counts.get(d.primary, 0) + 1
        return {
            "generated_at": datetime.fromtimestamp(self.generated_at, UTC).isoformat(),
            "engines": self.path.annotate(engines),
            "gateways": self.path.report(),
            "node": {"engines": len(engines), "primary_counts": counts},
            "thresholds": {k: getattr(self.thresholds, k) for k in field_names(Thresholds)},
        }

    def _diagnose(self, key: EngineKey, history: History) -> EngineDiagnosis:
        t = self.thresholds
        stages = of(ENGINE)
        role = history.latest().role
        results = {
            stage.id: stage.score(history, t) if stage.judged_on(role) else not_judged(stage.title, role)
            for stage in stages
        }
        scores = {stage_id: r.score for stage_id, r in results.items()}
        active, primary = self._hysteresis.judge(key, stages, scores, t)
        ordered = sorted(stages, key=lambda s: (not active[s.id], -scores[s.id]))
        evidence = []
        for stage in ordered:
            if active[stage.id] or stage is ordered[0]:
                evidence += [f"{stage.id} {scores[stage.id]:.2f}: {line}" for line in results[stage.id].evidence]
        unattributed = history.unattributed_gpus(t.level_seconds)
        if unattributed:
            # Said once per engine whatever stage leads: its verdict was reached without GPU data.
            evidence.append(
                f"GPU signals unattributed: node-wide ({len(unattributed)} GPUs, no engine label, several engines): "
                "used for this engine only where every GPU of the node agrees; set gpu_attribution to use them"
            )
        view = history.pd
        evidence += pair_evidence(view, evidence)
        settings = history.latest().settings
        actions = [a for s in ordered if active[s.id] for a in results[s.id].actions or s.actions_for(settings)]
        actions += balance_actions(view, role) if any(active.values()) else []
        inputs = history.latest()
        return EngineDiagnosis(
            key, scores, active, results, primary, evidence, actions, inputs.role, inputs.role_source, view
        )

    def _gauges(self, d: EngineDiagnosis) -> list[Metric]:
        engine, engine_type, model = d.key
        base = {"engine": engine, "engine_type": engine_type, "model": model}
        if d.role != "unified":
            base["role"] = d.role
        out: list[Metric] = []
        for stage, score in d.scores.items():
            labels = {**base, "stage": stage}
            out.append(Sample("llm_bottleneck_score", labels, round(score, 4)))
            out.append(Sample("llm_bottleneck_active", labels, 1.0 if d.active[stage] else 0.0))
        for stage in (*d.scores, NONE):
            out.append(Sample("llm_bottleneck_primary", {**base, "stage": stage}, 1.0 if d.primary == stage else 0.0))
        return out
