"""Slices: a target's series cut by tenant, LoRA adapter or priority class, with bounded cardinality.

Users ask for SLO attainment and the queue per tenant, per adapter and per priority class (vLLM,
llm-d, the Gateway API Inference Extension and LiteLLM threads: shared/research/field-2026.md §8.2).
A source carries a slice where its series are labelled with one: SGLang's `priority` and its
request-header custom labels, LiteLLM's `team_alias` / `api_key_alias`, the EPP's `priority`. Which
wire labels name which dimension is the target's `slice_labels` (docs/configuration.md); a label
valued "" or "None" (LiteLLM's spelling of unset) names no slice.

Each dimension keeps at most `max_slices_per_dimension` values; the rest are folded into `other`
(their counts added) and the number folded is exported, so a dashboard shows that a fold happened
and how large it was. Which values keep their own slice is decided by activity (requests over the
window, else the queue), with the values kept last time counted double so that two tenants of
similar size do not swap places every round (each swap would end one series and start another).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from exporter.model import Histogram, SliceKey
from exporter.settings import ScrapeLimits

OTHER = "other"
#: label values that name no slice (LiteLLM writes Python's None for an unset team or key alias)
UNSET = frozenset({"", "None", "none", "null"})
#: how much more active a new value must be to take a kept value's place
STICKINESS = 2.0


def slice_of(labels: Mapping[str, str], limits: ScrapeLimits) -> list[SliceKey]:
    """The slices a series belongs to, one per dimension whose label it carries with a value."""
    found = []
    for dimension, names in limits.slice_labels:
        for name in names:
            value = labels.get(name)
            if value is not None and value not in UNSET:
                found.append((dimension, value))
                break
    return found


def slice_label_names(limits: ScrapeLimits) -> frozenset[str]:
    """Every wire label that can name a slice: a source sums over them for its unsliced figures."""
    return frozenset(name for _, names in limits.slice_labels for name in names)


@dataclass(frozen=True)
class Fold:
    """One dimension's fold: the values that keep their own slice, and those folded into `other`."""

    kept: tuple[str, ...]
    folded: tuple[str, ...]

    def target(self, value: str) -> str:
        """The slice a value's series go to."""
        return value if value in self.kept else OTHER


def fold(activity: Mapping[str, float], limit: int, kept_before: Iterable[str] = ()) -> Fold:
    """At most `limit` values of one dimension keep their own slice: the most active, where a value
    kept last time counts `STICKINESS` times its activity. With `limit` 0 every value is folded."""
    before = set(kept_before)
    ranked = sorted(activity, key=lambda v: (-activity[v] * (STICKINESS if v in before else 1.0), v))
    kept = tuple(sorted(v for v in ranked[:limit] if v != OTHER))
    return Fold(kept, tuple(sorted(v for v in activity if v not in kept)))


def add_histograms(first: Histogram, second: Histogram) -> Histogram | None:
    """Two histograms of the same bucket layout added (slices folded into `other`); None when the
    layouts differ (a source that changed its buckets between series cannot be added up)."""
    if first.bounds != second.bounds:
        return None
    return Histogram(
        first.bounds,
        tuple(a + b for a, b in zip(first.cumulative, second.cumulative)),
        first.sum + second.sum,
        first.count + second.count,
    )
