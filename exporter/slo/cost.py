"""What a request costs: GPU-hours per million tokens and per request, at today's load and at the
capacity the SLO allows.

An engine costs the price of its GPUs' hours (`capacity.gpu_hour_price`, by the GPUs' `gpu_model`
label, `default` for any other): the GPUs attribution ties to it, or the node's on a one-engine
node (as the estimator reads them). Over the window:

    cost per request           = cost per second / completed requests per second
    cost per million prompt    = cost per second · prefill share / prompt tokens per second · 10⁶
    cost per million generated = cost per second · (1 − prefill share) / generated tokens per second · 10⁶

The prefill share splits the GPU time between the two kinds of token by how long requests occupy
the engine in each phase: prefill Σ(TTFT − queue time), decode Σ(e2e − TTFT), from the window sums
of the engine's own histograms. At the SLO-limited capacity (`load="slo_capacity"`, per SLO) the
same mix runs at the estimator's largest rate, so every figure scales by rate / max rate.

`docs/capacity.md` gives the PromQL of each figure; tests/integration/test_capacity_prometheus.py
evaluates it in a real Prometheus beside the exporter's values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.model import Metric, QuantileSummary, Sample
from exporter.slo.replicas import Estimate
from exporter.stages.inputs import gpu_owner
from exporter.window import LastSeen, RateWindow

PROMPT, GENERATED = "llm_engine_prompt_tokens_total", "llm_engine_generation_tokens_total"
_TTFT, _QUEUE, _E2E = (
    "llm_engine_time_to_first_token_seconds",
    "llm_engine_queue_time_seconds",
    "llm_engine_e2e_request_latency_seconds",
)
Key = tuple[str, str]


@dataclass(frozen=True)
class Mix:
    """One engine's load over the window: request and token rates, and the prefill share of its time."""

    requests_per_second: float
    prompt_tokens_per_second: float
    generated_tokens_per_second: float
    prefill_share: float

    @property
    def answer_tokens(self) -> float:
        return self.generated_tokens_per_second / self.requests_per_second if self.requests_per_second > 0 else math.nan


class MixWindow:
    """Per engine and model, the token counters' rates over the window and the request mix."""

    def __init__(self, window_seconds: float) -> None:
        self.window_seconds = window_seconds
        self._rates: dict[tuple[str, str, str], RateWindow] = {}
        #: a model rolled out (or an engine gone) leaves its windows: dropped once a whole window
        #: has passed without them, or they would pile up with every rollout
        self._seen: LastSeen[tuple[str, str, str]] = LastSeen(window_seconds)

    def update(self, metrics: Sequence[Metric], now: float) -> dict[Key, Mix]:
        tokens: dict[Key, dict[str, float]] = {}
        summaries: dict[Key, dict[str, QuantileSummary]] = {}
        observed: list[tuple[str, str, str]] = []
        for m in metrics:
            key = (m.labels.get("engine", ""), m.labels.get("model", ""))
            if isinstance(m, Sample) and m.name in (PROMPT, GENERATED) and "engine_type" in m.labels:
                observed.append((*key, m.name))
                window = self._rates.setdefault(observed[-1], RateWindow(self.window_seconds))
                rate = window.observe(now, m.value)
                if rate is not None:
                    tokens.setdefault(key, {})[m.name] = rate
            elif isinstance(m, QuantileSummary) and m.name in (_TTFT, _QUEUE, _E2E) and m.window is not None:
                summaries.setdefault(key, {})[m.name] = m
        for gone in self._seen.gone(observed, now):
            del self._rates[gone]
        mixes = {}
        for key, found in summaries.items():
            e2e = found.get(_E2E)
            if e2e is None or e2e.window is None or not e2e.window_seconds > 0 or key not in tokens:
                continue
            ttft_sum = _window_sum(found.get(_TTFT), math.nan)
            queue_sum = _window_sum(found.get(_QUEUE), 0.0)
            prefill, decode = max(0.0, ttft_sum - queue_sum), max(0.0, e2e.window.sum - ttft_sum)
            share = prefill / (prefill + decode) if prefill + decode > 0 else math.nan
            mixes[key] = Mix(
                e2e.window.count / e2e.window_seconds,
                tokens[key].get(PROMPT, math.nan),
                tokens[key].get(GENERATED, math.nan),
                share,
            )
        return mixes


def _window_sum(summary: QuantileSummary | None, absent: float) -> float:
    return summary.window.sum if summary is not None and summary.window is not None else absent


def engine_prices(metrics: Sequence[Metric], prices: Mapping[str, float]) -> dict[str, float]:
    """Per engine name, the price per hour of its GPUs; engines with no priced GPU are left out."""
    by_owner: dict[str, float] = {}
    engines: set[str] = set()
    for m in metrics:
        if isinstance(m, Sample) and m.name == "llm_gpu_up":
            price = prices.get(m.labels.get("gpu_model", "")) or prices.get("default")
            if price is not None:
                gpu_of = m.labels.get("engine", "")
                by_owner[gpu_of] = by_owner.get(gpu_of, 0.0) + price
        elif isinstance(m, Sample) and m.name == "llm_engine_up":
            engines.add(m.labels["engine"])
    out = {}
    for engine in engines:
        owner = gpu_owner(engine, by_owner, len(engines) == 1)
        if owner is not None:
            out[engine] = by_owner[owner]
    return out


@dataclass(frozen=True)
class EngineCost:
    labels: Mapping[str, str]
    per_hour: float
    mix: Mix
    #: SLO name -> the largest request rate under it
    capacities: Mapping[str, float]

    def figures(self, scale: float = 1.0) -> dict[str, float]:
        """Per request and per million tokens at the load `scale` times today's (same mix)."""
        per_second = self.per_hour / 3600.0
        mix = self.mix

        def per(rate: float) -> float:
            return per_second / (rate * scale) if rate > 0 else math.nan

        return {
            "request": per(mix.requests_per_second),
            "prompt": per(mix.prompt_tokens_per_second) * mix.prefill_share * 1e6,
            "generated": per(mix.generated_tokens_per_second) * (1.0 - mix.prefill_share) * 1e6,
        }

    def samples(self) -> Iterator[Metric]:
        labels = dict(self.labels)
        yield Sample("llm_cost_per_hour", labels, self.per_hour)
        loads: list[tuple[dict[str, str], float]] = [({"load": "current"}, 1.0)]
        rate = self.mix.requests_per_second
        loads += [
            ({"load": "slo_capacity", "slo": slo}, cap / rate) for slo, cap in self.capacities.items() if rate > 0
        ]
        for extra, scale in loads:
            figures = self.figures(scale)
            if math.isfinite(figures["request"]):
                yield Sample("llm_cost_per_request", {**labels, **extra}, figures["request"])
            for tokens in ("prompt", "generated"):
                if math.isfinite(figures[tokens]):
                    yield Sample("llm_cost_per_million_tokens", {**labels, **extra, "tokens": tokens}, figures[tokens])

    def as_json(self) -> dict[str, Any]:
        now = self.figures()
        return {
            "engine": self.labels.get("engine", ""),
            "model": self.labels.get("model", ""),
            "gpu_cost_per_hour": round(self.per_hour, 4),
            "current": {k: _rounded(v) for k, v in now.items()},
            "slo_capacity": {
                slo: {k: _rounded(v) for k, v in self.figures(cap / self.mix.requests_per_second).items()}
                for slo, cap in self.capacities.items()
                if self.mix.requests_per_second > 0
            },
            "prefill_share": _rounded(self.mix.prefill_share),
        }


def _rounded(value: float) -> float | None:
    return round(value, 6) if math.isfinite(value) else None


def costs(
    metrics: Sequence[Metric], mixes: Mapping[Key, Mix], found: Sequence[Estimate], prices: Mapping[str, float]
) -> list[EngineCost]:
    if not prices:
        return []
    hourly = engine_prices(metrics, prices)
    labels = {
        (m.labels["engine"], m.labels.get("model", "")): m.labels
        for m in metrics
        if isinstance(m, Sample) and m.name == "llm_engine_up" and m.value
    }
    out = []
    for key, mix in sorted(mixes.items()):
        if key[0] in hourly and key in labels:
            capacities = {e.slo: e.max_rate for e in found if (e.labels.get("engine"), e.labels.get("model")) == key}
            out.append(EngineCost(labels[key], hourly[key[0]], mix, {s: c for s, c in capacities.items() if c > 0}))
    return out
