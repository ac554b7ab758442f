"""Bottleneck diagnosis: the framework of docs/design.md as `llm_bottleneck_*` gauges and a report.

Reads only normalized metrics (exporter/stages/inputs.py), scores every engine-scope stage of the
registry (exporter/stages/) from several signals, applies hysteresis so `llm_bottleneck_active`
does not flap (verdict.py), and names one primary stage per engine with the evidence and the
actions worded for its settings. An engine is judged once it is up and its history spans a level
window; /diagnosis lists every engine the exporter scrapes with its state, and says why one has no
verdict (states.py). The stages before the engine are scored per gateway (path.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from exporter.diagnosis.coverage import coverage_fields
from exporter.diagnosis.path import PathDiagnoser
from exporter.diagnosis.pd import PairDiagnosis, balance_actions, not_judged, pair_evidence, pair_json
from exporter.diagnosis.states import EngineState, States, Status
from exporter.diagnosis.verdict import NONE, Hysteresis
from exporter.health.finding import Finding
from exporter.health.startup import Startup
from exporter.model import Metric, Sample
from exporter.settings import Thresholds, field_names
from exporter.stages import ENGINE, of
from exporter.stages.inputs import EngineInputs, EngineKey, engine_inputs, engine_key
from exporter.stages.pd_view import PdView
from exporter.stages.queueing import slice_score
from exporter.stages.record import StageResult
from exporter.stages.signals import History

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
    #: the (monotonic) time of the round that judged it
    at: float = 0.0
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


def _slice_scores(
    metrics: Sequence[Metric], judged: Mapping[EngineKey, EngineDiagnosis], t: Thresholds
) -> list[Metric]:
    """`llm_bottleneck_slice_score` of each judged engine's slices (queueing: its own waiting)."""
    out: list[Metric] = []
    for metric in metrics:
        if metric.name == "llm_engine_slice_requests_waiting" and isinstance(metric, Sample):
            key = engine_key(metric.labels)
            if key in judged:
                labels = {**_base_labels(judged[key]), "stage": "queueing"}
                labels.update(slice_by=metric.labels["slice_by"], slice=metric.labels["slice"])
                out.append(Sample("llm_bottleneck_slice_score", labels, round(slice_score(metric.value, t), 4)))
    return out


class Diagnoser:
    """Keeps each engine's recent inputs and turns every new snapshot into a diagnosis."""

    def __init__(self, thresholds: Thresholds | None = None, warm_up: bool = True) -> None:
        """`warm_up`: judge an engine only once its history spans a level window; `once` (one
        collection whose counters span the engines' lifetimes) judges its only point."""
        self.thresholds = thresholds or Thresholds()
        self._warm_up = warm_up
        self._histories: dict[EngineKey, History] = {}
        self._last_seen: dict[EngineKey, float] = {}
        self._hysteresis = Hysteresis()
        self.latest: dict[EngineKey, EngineDiagnosis] = {}
        #: each engine's inputs of the last round: what it does not report (coverage.py)
        self.inputs: dict[EngineKey, EngineInputs] = {}
        #: every engine scraped, with its state (up, down with its source's reason, asleep, ...)
        self.states = States()
        self.generated_at: float = time.time()
        self._now = 0.0
        self._notes: dict[EngineKey, list[str]] = {}
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
        actions: Mapping[EngineKey, Sequence[str]] | None = None,
        failures: Mapping[str, tuple[str, str]] | None = None,
        findings: Sequence[Finding] = (),
        starts: Mapping[str, Startup] | None = None,
    ) -> list[Metric]:
        """Diagnose every live engine in `metrics` (monotonic `now`); return the gauges. `notes`:
        evidence lines from outside the stages (the SLOs' attainment and headroom), per engine;
        `actions`: actions from outside the stages (the concurrency the SLOs allow), per engine.
        `answered_at`: per `engine` label, when that engine's answer was read (same clock), where
        the collection knows it. Each engine's point is stamped then, not at `now`: on a busy host
        a round lasts as long as its slowest source, and an answer that missed its round's
        deadline is published a round later, so stamping all at `now` put seconds of error into
        every counter rate over a 30 s level window (a counter at 0.95 cores read 0.81 with one
        round in four 4.3 s long: tests/unit/test_diagnosis.py). `failures`: per `engine` label,
        the (reason, message) of its source's failed collection, for /diagnosis. `findings`: the
        node's health findings (exporter/health/), which the stages they explain quote. `starts`:
        per `engine` label, its start-up (exporter/health/startup.py): whether it is loading or in
        its cold regime, which states.py makes its state."""
        t = self.thresholds
        self._now = now
        self.states.update(metrics, failures or {}, time.time(), starts or {})
        self.inputs = engine_inputs(metrics)
        # An engine asleep is not scored (it serves nothing) and keeps its history for when it wakes.
        sleeping = self.states.asleep()
        inputs = {key: engine for key, engine in self.inputs.items() if key not in sleeping}
        answered = answered_at or {}
        for key, engine in inputs.items():
            history = self._histories.setdefault(key, History(max(t.baseline_seconds, t.level_seconds * 2)))
            at = min(now, answered.get(key[0], now))
            if history.times:  # a point never goes before the one it follows
                at = max(at, history.times[-1])
            history.add(at, engine)
            history.findings = tuple(f for f in findings if not f.engine or f.engine == key[0])
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
            k
            for k in self._histories
            if k not in inputs and k not in sleeping and (k not in down or self._last_seen[k] < forget_before)
        ]:
            del self._histories[key]
            del self._last_seen[key]
            self._hysteresis.forget(key)
        pair_metrics = self.pairs.update(self._histories, inputs.keys(), metrics, t)
        # An engine is judged once its history spans a level window: before that its means and
        # rates rest on a few points, and its "best" inter-token latency on the first one. One
        # warming up (a start or a wake moments ago) is not judged: its slowness is its warm-up.
        # Its history grows meanwhile, so it is judged as soon as it is warm; no stage it had
        # active before its restart is held over.
        warming = self.states.warming_up()
        for key in warming:
            self._hysteresis.forget(key)
        # Built whole, then published: /diagnosis reads `latest` from the HTTP threads while a
        # round runs, and a key added to the published dict (an engine within its grace) broke
        # its iteration mid-answer.
        previous = self.latest
        latest = {
            key: self._diagnose(key, self._histories[key], now)
            for key in inputs
            if key not in warming and (not self._warm_up or self._span(key) >= t.level_seconds)
        }
        # Notes are facts beside any verdict (an SLO's attainment): an engine without one shows them too.
        notes_now = {key: list(lines) for key, lines in (notes or {}).items()}
        for key, lines in notes_now.items():
            if key in latest:
                latest[key].evidence.extend(lines)
        for key, advised in (actions or {}).items():
            if key in latest:
                latest[key].actions.extend(advised)
        # An engine within its grace keeps its last verdict (and its gauges) rather than losing
        # them for one collection; /diagnosis says the verdict is its last.
        for key in self._histories:
            if key not in inputs and key in previous and key not in sleeping:
                latest[key] = previous[key]
        self.latest, self._notes = latest, notes_now
        self.generated_at = time.time()
        gauges = [m for d in self.latest.values() for m in self._gauges(d)] + self.states.gauges()
        slices = _slice_scores(metrics, self.latest, t)
        return gauges + pair_metrics + slices + self.path.update(metrics, now, t)

    def report(self) -> dict[str, Any]:
        """The /diagnosis document (docs/design.md#http-endpoints): every engine scraped, its verdict where
        it has one, its state, why it has no verdict where it has none, and what it does not report."""
        engines = []
        for key in sorted(set(self.states.current) | set(self.latest)):
            verdict = self.latest.get(key)
            status = self.states.current.get(key) or Status(EngineState.UP, self.generated_at)
            entry = (
                verdict.as_json()
                if verdict is not None
                else _unjudged(key, self._notes.get(key, []), self.inputs.get(key))
            )
            entry.update(status.as_json())
            entry["no_verdict"] = self._why_no_verdict(key, status, verdict)
            if key in self.inputs:  # a live engine: the families its scrape lacked, its silent ranks
                entry.update(coverage_fields(self.inputs[key]))
            engines.append(entry)
        counts: dict[str, int] = {}
        for d in self.latest.values():
            counts[d.primary] = counts.get(d.primary, 0) + 1
        return {
            "generated_at": datetime.fromtimestamp(self.generated_at, UTC).isoformat(),
            "engines": self.path.annotate(engines),
            "gateways": self.path.report(),
            "node": {"engines": len(engines), "primary_counts": counts, "states": self.states.counts()},
            "thresholds": {k: getattr(self.thresholds, k) for k in field_names(Thresholds)},
        }

    def _span(self, key: EngineKey) -> float:
        times = self._histories[key].times
        return times[-1] - times[0] if times else 0.0

    def _why_no_verdict(self, key: EngineKey, status: Status, verdict: EngineDiagnosis | None) -> str | None:
        """None for a verdict of this round; else why there is none (or only the last one)."""
        if verdict is not None and verdict.at == self._now:
            return None
        t = self.thresholds
        if verdict is not None:  # down within its grace: the last verdict is kept
            return (
                f"{status.why_no_verdict()}: the verdict shown is its last, {self._now - verdict.at:.0f}s old, "
                f"kept while it is down for up to {2 * t.level_seconds:g}s"
            )
        if status.state is EngineState.UP:
            span = self._span(key) if key in self._histories else 0.0
            return f"not enough history yet: {span:.0f}s of the {t.level_seconds:g}s level window"
        return status.why_no_verdict()

    def _diagnose(self, key: EngineKey, history: History, now: float) -> EngineDiagnosis:
        t = self.thresholds
        stages = of(ENGINE)
        role = history.latest().role
        results = {
            stage.id: stage.score(history, t) if stage.judged_on(role) else not_judged(stage.title, role)
            for stage in stages
        }
        scores = {stage_id: r.score for stage_id, r in results.items()}
        active, primary = self._hysteresis.judge(key, stages, scores, t, now)
        ordered = sorted(stages, key=lambda s: (not active[s.id], -scores[s.id]))
        evidence = []
        for stage in ordered:
            if active[stage.id] or stage is ordered[0]:
                held = self._hysteresis.held(key, stage.id, t, now)
                lines = [*results[stage.id].evidence, *([held] if held else [])]
                evidence += [f"{stage.id} {scores[stage.id]:.2f}: {line}" for line in lines]
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
            key, scores, active, results, primary, evidence, actions, now, inputs.role, inputs.role_source, view
        )

    def _gauges(self, d: EngineDiagnosis) -> list[Metric]:
        base = _base_labels(d)
        out: list[Metric] = []
        for stage, score in d.scores.items():
            labels = {**base, "stage": stage}
            out.append(Sample("llm_bottleneck_score", labels, round(score, 4)))
            out.append(Sample("llm_bottleneck_active", labels, 1.0 if d.active[stage] else 0.0))
        for stage in (*d.scores, NONE):
            out.append(Sample("llm_bottleneck_primary", {**base, "stage": stage}, 1.0 if d.primary == stage else 0.0))
        return out


def _base_labels(d: EngineDiagnosis) -> dict[str, str]:
    """The labels of an engine's diagnosis series: its identity, and its role in a pair."""
    engine, engine_type, model = d.key
    base = {"engine": engine, "engine_type": engine_type, "model": model}
    if d.role != "unified":
        base["role"] = d.role
    return base


def _unjudged(key: EngineKey, notes: list[str], inputs: EngineInputs | None) -> dict[str, Any]:
    """An engine's /diagnosis fields without a verdict: no primary stage (null), nothing scored;
    its evidence is the notes from outside the stages (an SLO's attainment) alone. Its role is
    known from its series before any verdict."""
    engine, engine_type, model = key
    return {
        "engine": engine,
        "engine_type": engine_type,
        "model": model,
        "role": inputs.role if inputs is not None else "unified",
        "role_source": inputs.role_source if inputs is not None else "",
        "primary": None,
        "scores": {},
        "active": [],
        "evidence": notes,
        "actions": [],
    }
