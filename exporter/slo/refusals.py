"""Requests refused at the door, counted as SLO misses.

A request an admission limit refuses (vLLM `--max-num-queued-reqs`/`-tokens` answer 503 and count
`vllm:admission_rejections_total`; a gateway's rate limit answers 429, its shedding 503) never
reaches a latency histogram: judged on the histograms alone, an engine that turns away half its
load looks as good as one that serves all of it. So each refusal is an event that missed every
threshold (inference-perf #169, vLLM PR #55812; shared/research/field-2026.md §8.8):

- attainment of a request dimension (`ttft`, `e2e`) is the count within the threshold over the
  window's requests *and* refusals, and `llm_slo_events_total` counts refusals too, so the burn
  rates see them;
- goodput stays attainment × the completed-request rate: with every served request within the
  threshold it is the completed rate less the refused share, the rate the demand was served at;
- `itl` judges token gaps, of which a refused request has none: its attainment is unchanged and
  its goodput estimate takes the refused share off the same way.

Engines count their refusals per engine and model; a gateway per gateway (`code` 429 and 503 of
`llm_gateway_requests_total`), for attainment measured at the gateway; a prober's requests are its
own and count none. A gateway whose latency histograms already hold its refused responses
(`GatewayMapping.refusals_in_histograms`: ingress-nginx observes every request, HAProxy's access log
every response below 500) has them among its events already, most likely as fast ones within any
threshold: they are taken off its good events instead of added again, which keeps the attainment a
lower bound (at most that many of the good events were refusals). Windows follow the SLO monitor's
rounds, as the engine source's windows follow its scrapes: the same span, within a round.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from exporter.model import Metric, Sample
from exporter.slo.attainment import DimensionAttainment, WithinCount
from exporter.sources.gateways import MAPPINGS as GATEWAYS
from exporter.window import DeltaWindow, LastSeen

#: the HTTP statuses of a refusal at a gateway: rate limited, or shed for overload
REFUSED_CODES = ("429", "503")
#: the dimensions whose events are requests (a refusal is one of them)
REQUEST_DIMENSIONS = ("ttft", "e2e")
PointKey = tuple[str, ...]


class Refused(NamedTuple):
    """Refusals of one measuring point: those its histograms lack (`added` as misses) and those
    they already hold as requests (`held`, moved from the good events to the misses)."""

    added: float = 0.0
    held: float = 0.0

    @property
    def total(self) -> float:
        return self.added + self.held


def point_key(labels: Mapping[str, str]) -> PointKey:
    """The measuring point a series belongs to: a gateway, a probe, or an engine and model."""
    if "gateway" in labels:
        return ("gateway", labels["gateway"])
    if "probe" in labels:
        return ("probe", labels["probe"])
    return ("engine", labels.get("engine", ""), labels.get("model", ""))


def refusal_counts(metrics: Iterable[Metric]) -> dict[PointKey, Refused]:
    """Each measuring point's cumulative refusals in this snapshot: none for a point that is up
    with no refusal series yet. A labelled counter appears with its first increment, and not
    always at one: the refusals between the scrape before and the one that first shows it count
    from zero, as they would have if the series had been there all along."""
    counts: dict[PointKey, Refused] = {}
    for metric in metrics:
        if not isinstance(metric, Sample):
            continue
        if metric.name == "llm_engine_up" and metric.value == 1.0:
            counts.setdefault(point_key(metric.labels), Refused())
            continue
        held = False
        if metric.name == "llm_gateway_requests_total":
            counts.setdefault(point_key(metric.labels), Refused())
            code = metric.labels.get("code")
            if code not in REFUSED_CODES:
                continue
            mapping = GATEWAYS.get(metric.labels.get("gateway_type", ""))
            held = mapping is not None and code in mapping.refusals_in_histograms
        elif metric.name != "llm_engine_admission_rejections_total":
            continue
        key = point_key(metric.labels)
        added, kept = counts.get(key, Refused())
        counts[key] = Refused(added, kept + metric.value) if held else Refused(added + metric.value, kept)
    return counts


class Refusals:
    """Refusals over the window, per measuring point, kept from round to round."""

    def __init__(self, window_seconds: float) -> None:
        self._window_seconds = window_seconds
        self._windows: dict[PointKey, DeltaWindow] = {}
        self._lifetime: dict[PointKey, Refused] = {}
        self._seen: LastSeen[PointKey] = LastSeen(window_seconds)

    def update(self, metrics: Sequence[Metric], now: float) -> Refusals:
        """Count this round's refusals. A point missing from a round keeps its window, as its
        latency histograms keep theirs, or the refusals before the gap would drop out while the
        requests served before it stayed (window.LastSeen)."""
        counts = refusal_counts(metrics)
        for key, count in counts.items():
            self._windows.setdefault(key, DeltaWindow(self._window_seconds)).observe(now, count)
        for key in self._seen.gone(counts, now):
            del self._windows[key], self._lifetime[key]
        self._lifetime.update(counts)
        return self

    def window(self, labels: Mapping[str, str]) -> Refused | None:
        window = self._windows.get(point_key(labels))
        totals = window.total() if window is not None else None
        return None if totals is None else Refused(*totals[:2])

    def lifetime(self, labels: Mapping[str, str]) -> Refused | None:
        return self._lifetime.get(point_key(labels))


def with_refusals(results: Sequence[DimensionAttainment], refusals: Refusals) -> list[DimensionAttainment]:
    """Each result with its measuring point's refusals counted as misses (see the module's doc)."""
    out = []
    for item in results:
        refused, lifetime = refusals.window(item.labels), refusals.lifetime(item.labels)
        if not (refused and refused.total) and not (lifetime and lifetime.total):
            out.append(item)
            continue
        window, share = item.window, item.refused_share
        request_events = item.dimension in REQUEST_DIMENSIONS
        if window is not None and refused and refused.total:
            served = window.total - refused.held if request_events else item.requests_per_second
            share = _share(refused.total, item, served)
            if request_events:
                window = _as_misses(window, refused)
        life = item.lifetime
        if lifetime and request_events:
            life = _as_misses(life, lifetime)
        out.append(dataclasses.replace(item, window=window, lifetime=life, refused_share=share))
    return out


def _as_misses(count: WithinCount, refused: Refused) -> WithinCount:
    """`count` with the refusals as misses: those it lacked added to its events, those it held
    taken off the events certainly within (never below none)."""
    return WithinCount(max(0.0, count.lower - refused.held), count.upper, count.total + refused.added)


def _share(refused: float, item: DimensionAttainment, served: float) -> float:
    """Refusals over arrivals in the window. For `itl` the served requests are not its events:
    they come from the completed-request rate over the window the attainment covers."""
    if item.dimension not in REQUEST_DIMENSIONS:
        served = served * item.window_seconds if item.window_seconds == item.window_seconds else 0.0
    arrivals = served + refused
    return refused / arrivals if arrivals > 0 else 0.0
