"""The concurrency that maximizes throughput under the latency constraint, per engine.

Throughput rises with the running batch until the latency SLOs break: the most requests an engine
should run at once is the largest batch whose predicted latency at today's request mix stays within
every SLO covering it, the smallest of the estimator's `llm_capacity_max_concurrency` over them
(exporter/slo/headroom.py: the decode pace fitted on the engine's own history, its KV admission
and queueing, its compute roofline). The throughput at that batch is the estimator's rate there,
times the window's mean answer for tokens per second.

That is what `max_num_seqs` (vLLM; SGLang's `max_running_requests`) should be near. The value in
force is taken from the configuration (`capacity.max_num_seqs`, by engine name, `default` for the
others): vLLM exports none of its scheduler settings. Where it sits more than
`capacity.concurrency_tolerance` away, /diagnosis gains an action: too high and a burst runs a
batch whose latency breaks the SLO, too low and throughput is left on the table while requests
queue. An estimate on the prior alone (confidence under MIN_CONFIDENCE: the load has not varied
enough to fit the decode pace) is quoted in the evidence but makes no action: on the simulator's
healthy mix it sat 40 % under the knee, where the fitted ones were within 20 % of it
(tests/perf/slo_decisions.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.model import Metric, Sample
from exporter.settings import CapacitySettings
from exporter.slo.cost import Mix
from exporter.slo.replicas import Estimate

#: below this the estimate rests on the prior more than on the engine's own history (a steady load
#: shows one point of the decode pace): said in the evidence, not turned into an action
MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class ConcurrencyAdvice:
    engine: str
    model: str
    labels: dict[str, str]
    slo: str  # the SLO that binds first
    recommended: float  # running requests
    requests_per_second: float  # throughput at that batch
    tokens_per_second: float  # generated tokens per second there (NaN without a token count)
    configured: int | None
    tolerance: float
    confidence: float = 1.0

    @property
    def action(self) -> str | None:
        """An action where the configured concurrency is far from the recommended one."""
        if self.configured is None or not self.recommended > 0 or self.confidence < MIN_CONFIDENCE:
            return None
        at = f"~{self.recommended:.0f} running requests is the most that keeps SLO {self.slo} at today's mix"
        if self.configured > self.recommended * (1 + self.tolerance):
            return (
                f"Lower max_num_seqs from {self.configured} to ~{self.recommended:.0f}: {at} "
                f"(~{self.requests_per_second:.1f} req/s); a burst that fills {self.configured} breaks it"
            )
        if self.configured < self.recommended / (1 + self.tolerance):
            return (
                f"Raise max_num_seqs from {self.configured} to ~{self.recommended:.0f}: {at}, "
                f"~{self.requests_per_second:.1f} req/s{self._tokens()}; at {self.configured} throughput is left "
                "on the table while requests queue"
            )
        return None

    def _tokens(self) -> str:
        return f" ({self.tokens_per_second:.0f} generated tokens/s)" if math.isfinite(self.tokens_per_second) else ""

    def line(self) -> str:
        configured = f"; max_num_seqs {self.configured}" if self.configured is not None else ""
        return (
            f"concurrency under the SLOs: at most ~{self.recommended:.0f} running (SLO {self.slo} binds), "
            f"~{self.requests_per_second:.1f} req/s{self._tokens()}{configured}; confidence {self.confidence:.2f}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "model": self.model,
            "binding_slo": self.slo,
            "recommended_concurrency": round(self.recommended, 1),
            "throughput_requests_per_second": round(self.requests_per_second, 3),
            "throughput_generated_tokens_per_second": None
            if not math.isfinite(self.tokens_per_second)
            else round(self.tokens_per_second, 1),
            "configured_max_num_seqs": self.configured,
            "confidence": round(self.confidence, 3),
            "action": self.action,
        }


def advise(
    found: Sequence[Estimate], mixes: Mapping[tuple[str, str], Mix], settings: CapacitySettings
) -> list[ConcurrencyAdvice]:
    by_engine: dict[tuple[str, str], Estimate] = {}
    for e in found:
        key = (e.labels.get("engine", ""), e.labels.get("model", ""))
        if e.max_concurrency > 0 and (key not in by_engine or e.max_concurrency < by_engine[key].max_concurrency):
            by_engine[key] = e
    out = []
    for (engine, model), e in sorted(by_engine.items()):
        configured = settings.max_num_seqs.get(engine, settings.max_num_seqs.get("default"))
        out.append(
            ConcurrencyAdvice(
                engine,
                model,
                dict(e.labels),
                e.slo,
                e.max_concurrency,
                e.max_rate,
                e.max_rate * (mixes[(engine, model)].answer_tokens if (engine, model) in mixes else math.nan),
                configured,
                settings.concurrency_tolerance,
                e.confidence,
            )
        )
    return out


def samples(advice: Sequence[ConcurrencyAdvice]) -> Iterator[Metric]:
    for a in advice:
        yield Sample("llm_capacity_recommended_concurrency", {**a.labels, "slo": a.slo}, a.recommended)
        if math.isfinite(a.tokens_per_second):
            yield Sample(
                "llm_capacity_recommended_throughput_tokens_per_second", {**a.labels, "slo": a.slo}, a.tokens_per_second
            )
        if a.configured is not None:
            yield Sample("llm_capacity_configured_concurrency", a.labels, float(a.configured))
