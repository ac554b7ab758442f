"""Building blocks shared by the engine mappings: selecting, de-duplicating and summing series.

Every engine repeats one pattern: a few families, preferred names first and older spellings after,
one series per model and per rank, ranks to sum (data parallel) or to keep once (tensor parallel
ranks repeat the same scheduler state). `DeclarativeMapping` states that once; each engine module
only lists its names and adds what its schema does differently in `finish()`.

`EngineMapping` is the contract the engine source relies on: what every mapping must implement
(abstract), and the capabilities a mapping may declare, each with its default stated here once.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import Literal

from exporter.model import EngineReading, Histogram
from exporter.promtext import LabelKey, ParsedSamples, parse_number
from exporter.settings import ScrapeLimits
from exporter.sources.engines.connectors import Connector
from exporter.sources.engines.histogram_layout import HistogramLayout, Layouts, Slot

Reduce = Literal["sum", "max", "mean"]
MODEL_LABELS = ("model_name", "model", "name")


@dataclass(frozen=True)
class Signal:
    """A gauge or counter: the EngineReading field it fills and the wire names, newest first.

    Read as engines vary (`spellings`): a counter is also read without `_total` (an exporter that
    writes its counters bare), right after its `_total` spelling, so a newer name in either spelling
    wins over an older one and one family is never read twice. `histogram_fallback`: a family that
    became a histogram in later versions under the same base name (SGLang's `kv_transfer_*`) is read
    as the mean of what it observed (`_sum / _count`) where no gauge series is there.
    """

    field: str
    names: tuple[str, ...]
    reduce: Reduce = "sum"
    match: tuple[tuple[str, str], ...] = ()
    histogram_fallback: bool = False

    @cached_property
    def spellings(self) -> tuple[str, ...]:
        return counter_spellings(self.names)


@lru_cache(maxsize=1024)
def counter_spellings(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` in order, each counter (`…_total`) followed by its bare spelling: OpenMetrics names
    the family without `_total` and its sample with it, and exporters that write the text format by
    hand name counters either way. Remembered: the mappings ask it of the same fixed names at
    every scrape of every target."""
    out: list[str] = []
    for name in names:
        out.append(name)
        if name.endswith("_total") and len(name) > len("_total"):
            out.append(name[: -len("_total")])
    return tuple(dict.fromkeys(out))


def spellings(name: str, *prefixes: str) -> tuple[str, ...]:
    """`name` under each prefix, in order of preference: one engine's families as it writes them
    and as a gateway or a framework in front of it renames them (SGLang's `sglang:` and `sglang_`)."""
    return tuple(prefix + name for prefix in prefixes)


def read_counter(parsed: ParsedSamples, name: str) -> dict[LabelKey, float]:
    """A counter's series under its `_total` spelling, else its bare one (what `finish()` reads of
    `extra_names`, which `read_names` keeps in both spellings)."""
    return first_present(parsed, counter_spellings((name,)))


def histogram_means(parsed: ParsedSamples, names: Iterable[str]) -> dict[LabelKey, float]:
    """Per series of the first name with a `_count`, the mean it observed (`_sum / _count`), for a
    family read as a gauge that became a histogram; series that observed nothing are left out."""
    for name in names:
        counts = parsed.get(name + "_count")
        if counts:
            sums = parsed.get(name + "_sum", {})
            return {key: sums[key] / count for key, count in counts.items() if count > 0 and key in sums}
    return {}


@dataclass(frozen=True)
class HistogramSignal:
    """A latency histogram: its key in EngineReading.histograms, wire base names, unit scale."""

    key: str
    names: tuple[str, ...]
    scale: float = 1.0  # multiply bounds and sums by this to get seconds


def model_of(labels: dict[str, str]) -> str:
    for key in MODEL_LABELS:
        if key in labels:
            return labels[key]
    return ""


def _group_key(labels: dict[str, str], ignored: frozenset[str]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in sorted(labels.items()) if k not in ignored)


def _rank_order(labels: dict[str, str], duplicate_labels: frozenset[str]) -> tuple[str, ...]:
    return tuple(labels.get(k, "") for k in sorted(duplicate_labels))


class RecentSlots:
    """The label sets `_slot_of` remembers: those read since the last turn, and the ones of the
    turn before, moved back on their next read. A turn comes once the label sets new since the last
    one outnumber those read again (and `TURN_FLOOR`), so label sets that stop
    occurring (a replaced model's, a departed engine's) are forgotten two turns later: what is
    kept follows the label sets being read, not every one ever seen, which on a node whose models
    are replaced now and then grows for as long as the process lives. A character budget per turn
    bounds it against a target that changes its label values every scrape (or a hostile one)."""

    TURN_FLOOR = 512
    CHARS_PER_TURN = 2 * 1024 * 1024

    def __init__(self) -> None:
        self.now: dict[tuple[LabelKey, frozenset[str], frozenset[str]], Slot] = {}
        self.before: dict[tuple[LabelKey, frozenset[str], frozenset[str]], Slot] = {}
        self._new = 0
        self._chars = 0

    def get(self, key: tuple[LabelKey, frozenset[str], frozenset[str]]) -> Slot | None:
        slot = self.now.get(key)
        if slot is None:
            slot = self.before.pop(key, None)
            if slot is not None:
                self.now[key] = slot
        return slot

    def put(self, key: tuple[LabelKey, frozenset[str], frozenset[str]], slot: Slot) -> None:
        chars = sum(len(name) + len(value) for name, value in key[0])
        new = self._new
        if new >= max(self.TURN_FLOOR, len(self.now) - new) or self._chars + chars > self.CHARS_PER_TURN:
            self.before, self.now = self.now, {}
            self._new = self._chars = 0
        self.now[key] = slot
        self._new += 1
        self._chars += chars

    def __len__(self) -> int:
        return len(self.now) + len(self.before)


_SLOTS = RecentSlots()


def _slot_of(key: LabelKey, ignored: frozenset[str], duplicate_labels: frozenset[str]) -> Slot:
    """(model, group key, rank order, `le` bound or None when absent or unparsable) of a series.

    Remembered (RecentSlots): an engine's label sets are the same every scrape, and working them
    out again (a dict, two sorts, a float parse) is most of reducing a signal's series; a
    histogram's buckets ask it only when their layout is worked out (histogram_layout.py).
    """
    cache_key = (key, ignored, duplicate_labels)
    slot = _SLOTS.get(cache_key)
    if slot is not None:
        return slot
    labels = dict(key)
    # a bound as the formats write numbers (`le="1_0"` is none, though float() reads it)
    bound = parse_number(labels.get("le", "NaN"))
    if bound is not None and math.isnan(bound):
        bound = None
    slot = (model_of(labels), _group_key(labels, ignored), _rank_order(labels, duplicate_labels), bound)
    _SLOTS.put(cache_key, slot)
    return slot


def first_present(parsed: ParsedSamples, names: Iterable[str]) -> dict[LabelKey, float]:
    """The series of the first name that has any: the newest spelling wins over deprecated ones."""
    for name in names:
        series = parsed.get(name)
        if series:
            return series
    return {}


@lru_cache(maxsize=256)
def _ignored(duplicate_labels: frozenset[str], match: tuple[tuple[str, str], ...]) -> frozenset[str]:
    """The labels a series is grouped without: its model's, the duplicated ranks', the matched ones
    (worked out once per signal, not per series read)."""
    return frozenset(MODEL_LABELS) | duplicate_labels | {k for k, _ in match}


def reduce_by_model(
    series: dict[LabelKey, float],
    reduce: Reduce,
    duplicate_labels: frozenset[str] = frozenset(),
    match: Sequence[tuple[str, str]] = (),
) -> dict[str, float]:
    """One value per model: series that differ only in `duplicate_labels` count once (lowest
    rank kept), the remaining series of a model (data-parallel ranks) are summed, maxed or
    averaged (a per-GPU counter: the mean of monotonic counters stays monotonic, the max does not)."""
    ignored = _ignored(duplicate_labels, tuple(match))
    chosen: dict[tuple[str, tuple], tuple[tuple[str, ...], float]] = {}
    for key, value in series.items():
        if match:
            labels = dict(key)
            if any(labels.get(k) != v for k, v in match):
                continue
        model, group_key, order, _ = _slot_of(key, ignored, duplicate_labels)
        group = (model, group_key)
        if group not in chosen or order < chosen[group][0]:
            chosen[group] = (order, value)
    result: dict[str, float] = {}
    groups: dict[str, int] = {}
    for (model, _), (_, value) in chosen.items():
        groups[model] = groups.get(model, 0) + 1
        if model not in result:
            result[model] = value
        elif reduce == "max":
            result[model] = max(result[model], value)
        else:
            result[model] += value
    if reduce == "mean":
        return {model: total / groups[model] for model, total in result.items()}
    return result


def ranks_by_model(series: dict[LabelKey, float], rank_labels: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per model, the ranks whose series are present, each named by its rank labels
    ("engine=1", "dp_rank=2,tp_rank=0"); duplicate ranks (tensor-parallel copies of one scheduler)
    are named too when the engine exports them, since each one may stop reporting on its own."""
    found: dict[str, set[str]] = {}
    for key in series:
        labels = dict(key)
        name = ",".join(f"{k}={labels[k]}" for k in rank_labels if k in labels)
        if name:
            found.setdefault(model_of(labels), set()).add(name)
    return {model: tuple(sorted(names, key=_natural)) for model, names in found.items()}


def _natural(name: str) -> tuple[tuple[str, int], ...]:
    """ "dp_rank=10" after "dp_rank=9"."""
    parts = []
    for pair in name.split(","):
        key, _, value = pair.partition("=")
        parts.append((key, int(value) if value.isdigit() else -1))
    return tuple(parts)


def read_histograms(
    parsed: ParsedSamples, names: Sequence[str], scale: float, duplicate_labels: frozenset[str]
) -> dict[str, Histogram]:
    """One histogram per model, buckets summed over ranks; the first base name with buckets wins.

    A histogram whose +Inf bucket is missing (a truncated payload) is skipped: without it the
    total is unknown and every quantile would be wrong.
    """
    for name in names:
        buckets = parsed.get(name + "_bucket")
        if buckets:
            return _assemble(parsed, name, buckets, scale, duplicate_labels)
    return {}


def _assemble(
    parsed: ParsedSamples,
    name: str,
    buckets: dict[LabelKey, float],
    scale: float,
    duplicate_labels: frozenset[str],
) -> dict[str, Histogram]:
    keys = tuple(buckets)

    def worked_out() -> HistogramLayout:
        ignored = frozenset(MODEL_LABELS) | duplicate_labels | {"le"}
        return HistogramLayout.of(keys, lambda labels: _slot_of(labels, ignored, duplicate_labels), scale)

    layout = _LAYOUTS.layout((keys, duplicate_labels, scale), worked_out)
    sums = reduce_by_model(parsed.get(name + "_sum", {}), "sum", duplicate_labels)
    counts = reduce_by_model(parsed.get(name + "_count", {}), "sum", duplicate_labels)
    return {
        model: Histogram(
            bounds=bounds,
            cumulative=cumulative,
            sum=sums.get(model, math.nan) * scale,
            count=counts.get(model, cumulative[-1]),
        )
        for model, bounds, cumulative in layout.histograms(tuple(buckets.values()))
    }


_LAYOUTS = Layouts()


class EngineMapping(ABC):
    """One engine's exposition → `EngineReading`s, as the engine source uses it.

    Subclasses set `engine_type` as a class attribute and may override the declared capabilities.
    """

    # Declared capabilities, with their defaults:
    # The exposition has no model label: the model comes from the configuration or the engine's
    # `/info` endpoint (TGI).
    needs_model_from_info: bool = False
    # The latency histograms it reads, by wire name and unit: the recording rules read the engines'
    # own histograms under these names when Prometheus scrapes the engines too.
    histograms: tuple[HistogramSignal, ...] = ()
    # The labels that tell one rank of the engine from another (vLLM's data-parallel `engine`,
    # SGLang's scheduler ranks): the engine source names a rank that stops reporting.
    rank_labels: tuple[str, ...] = ()
    # Info metrics it reads (a configuration's settings as labels) and the labels it reads of each:
    # the parser keeps only those, bounded, whatever the size of the label set (vLLM's config info
    # can carry a model's whole configuration).
    info_labels: Mapping[str, frozenset[str]] = MappingProxyType({})
    # The KV connectors whose transfer families it exports when serving disaggregated, read by
    # kv_transfer.py and listed per engine type in the metrics reference.
    kv_connectors: tuple[Connector, ...] = ()

    @property
    @abstractmethod
    def engine_type(self) -> str:
        """The configuration's `type:` for this engine, and the name it is detected as."""

    @abstractmethod
    def matches(self, names: set[str]) -> bool:
        """Whether a payload with these sample names is this engine's."""

    @abstractmethod
    def wanted(self) -> frozenset[str]:
        """Every sample name `read` looks at, as the engine spells it (what a query may name)."""

    def read_names(self) -> frozenset[str]:
        """The names the parser keeps for `read`: `wanted()` and the other spellings read where
        engines vary (a counter without `_total`); default: `wanted()`."""
        return self.wanted()

    @abstractmethod
    def read(self, parsed: ParsedSamples) -> list[EngineReading]:
        """One reading per model, sorted by model name."""

    def read_slices(self, parsed: ParsedSamples, limits: ScrapeLimits, readings: Sequence[EngineReading]) -> None:
        """Fill each reading's slices (tenant, adapter, priority class) where the engine's series
        carry them (exporter/slicing.py); default: the engine carries none."""
        return None


class DeclarativeMapping(EngineMapping):
    """An engine schema described by its signals; subclasses override `finish` for quirks."""

    signals: tuple[Signal, ...] = ()
    duplicate_labels: frozenset[str] = frozenset()
    extra_names: tuple[str, ...] = ()  # wire names read only by finish()

    def wanted(self) -> frozenset[str]:
        names = set(self.extra_names) | set(self.info_labels)
        for signal in self.signals:
            names.update(signal.names)
            if signal.histogram_fallback:
                names.update(name + suffix for name in signal.names for suffix in ("_sum", "_count"))
        for hist in self.histograms:
            for base in hist.names:
                names.update((base + "_bucket", base + "_sum", base + "_count"))
        return frozenset(names)

    def read_names(self) -> frozenset[str]:
        return self.wanted().union(counter_spellings(self.extra_names), *(signal.spellings for signal in self.signals))

    def read(self, parsed: ParsedSamples) -> list[EngineReading]:
        readings: dict[str, EngineReading] = {}

        def reading(model: str) -> EngineReading:
            if model not in readings:
                readings[model] = EngineReading(model=model)
            return readings[model]

        for index, signal in enumerate(self.signals):
            series = first_present(parsed, signal.spellings)
            if not series and signal.histogram_fallback:
                series = histogram_means(parsed, signal.names)
            for model, value in reduce_by_model(series, signal.reduce, self.duplicate_labels, signal.match).items():
                setattr(reading(model), signal.field, value)
            if index == 0 and self.rank_labels:  # the first signal (requests running) names the ranks
                for model, ranks in ranks_by_model(series, self.rank_labels).items():
                    reading(model).ranks = ranks
        for hist in self.histograms:
            found = read_histograms(parsed, hist.names, hist.scale, self.duplicate_labels)
            for model, histogram in found.items():
                reading(model).histograms[hist.key] = histogram
        self.finish(parsed, reading, readings)
        return sorted(readings.values(), key=lambda r: r.model)

    def finish(
        self,
        parsed: ParsedSamples,
        reading: Callable[[str], EngineReading],
        readings: dict[str, EngineReading],
    ) -> None:
        """Engine-specific derivations (ratios from used/max, fallbacks); default: nothing."""


def has_prefix(names: Iterable[str], *prefixes: str) -> bool:
    return any(name.startswith(prefixes) for name in names)
