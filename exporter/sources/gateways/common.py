"""What every gateway mapping produces, and the helpers they share.

A gateway reports its side of the path: how many requests it answered by status, how long it took
(whole request, time to first token where it measures one, the upstream part), what waits in it and
how many backends it can reach. Each mapping turns one gateway's exposition into one
`GatewayReading`; `GatewaySource` turns that into the `llm_gateway_*` families.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from exporter.model import Histogram
from exporter.promtext import LabelKey, ParsedSamples, parse_number
from exporter.sources.engines.common import first_present

#: the status codes that say something about the path, kept as a `code` label; others only by class:
#: timeouts (408 the client's, 504 the upstream's), client aborts (499), refusals and upstream failures
CODES_OF_NOTE = frozenset({"408", "429", "499", "502", "503", "504"})
CODE_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
#: keys of `GatewayReading.histograms` (and `.averages`), each a `llm_gateway_*_seconds` summary
LATENCY_KEYS = ("request_duration", "time_to_first_token", "upstream_duration", "queue_time", "kv_transfer_estimate")


@dataclass(slots=True)
class GatewayReading:
    """One gateway's side of the path, summed over its listeners, routes and models.

    `None` means the gateway has no such signal; it is left out rather than faked as zero.
    """

    #: cumulative responses by (code_class, code); code is "" unless it is one of CODES_OF_NOTE
    responses: dict[tuple[str, str], float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)
    #: means the gateway computes itself (HAProxy: over its last 1024 requests), by LATENCY_KEYS
    averages: dict[str, float] = field(default_factory=dict)
    requests_in_flight: float | None = None
    requests_queued: float | None = None
    connections_active: float | None = None
    connections_limit: float | None = None
    #: backends (servers, endpoints, deployments) by state: "up", "down"
    backends: dict[str, float] = field(default_factory=dict)
    upstream_connection_errors_total: float | None = None
    #: a disaggregating proxy's pipeline steps as it times them, by step (llm-d's P/D coordinator)
    steps: dict[str, Histogram] = field(default_factory=dict)
    #: per slice (tenant, adapter, priority class: exporter/slicing.py) where the gateway labels its
    #: histograms with one (exporter/sources/gateway_slices.py); the queue is not read per slice
    slice_histograms: dict[tuple[str, str], dict[str, Histogram]] = field(default_factory=dict)
    slice_running: dict[tuple[str, str], float] = field(default_factory=dict)
    slice_waiting: dict[tuple[str, str], float] = field(default_factory=dict)

    def count(self, status: str, value: float) -> None:
        """Add `value` responses of HTTP `status` ("503", or a class such as "5xx")."""
        key = status_key(status)
        if key is not None:
            self.responses[key] = self.responses.get(key, 0.0) + value


def status_key(status: str) -> tuple[str, str] | None:
    """("5xx", "503") for "503", ("5xx", "") for "500" or "5xx"; None for what is no status."""
    status = status.strip().lower()
    if len(status) == 3 and status[0] in "12345" and (status[1:].isdigit() or status[1:] == "xx"):
        return f"{status[0]}xx", status if status in CODES_OF_NOTE else ""
    return None


class GatewayMapping(ABC):
    """One gateway's exposition → a `GatewayReading`."""

    #: where its time-to-first-token clock starts and stops (docs/metrics.md), None if it has none
    ttft_clock: str | None = None
    #: the histograms read per slice as well (reading key, wire base names newest first): those
    #: whose series carry the request's tenant, adapter or priority labels
    sliced_histograms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: the refusal statuses (429, 503) whose responses its latency histograms already hold as
    #: requests, each within a few milliseconds: an SLO judged there moves them from its good events
    #: to its misses rather than adding them again (exporter/slo/refusals.py)
    refusals_in_histograms: frozenset[str] = frozenset()

    @property
    @abstractmethod
    def gateway_type(self) -> str:
        """The configuration's `type:` for this gateway, and the name it is detected as."""

    @abstractmethod
    def matches(self, names: set[str]) -> bool:
        """Whether a payload with these sample names is this gateway's."""

    @abstractmethod
    def wanted(self) -> frozenset[str]:
        """Every sample name `read` looks at."""

    @abstractmethod
    def read(self, parsed: ParsedSamples) -> GatewayReading:
        """The reading of one scrape."""


def histogram_names(*bases: str) -> set[str]:
    return {base + suffix for base in bases for suffix in ("_bucket", "_sum", "_count")}


def total(series: Mapping[LabelKey, float], match: Mapping[str, str] | None = None) -> float | None:
    """Sum of the series whose labels match; None when there are none (the signal is absent)."""
    values = [v for key, v in series.items() if _matches(key, match)]
    return math.fsum(values) if values else None


def _matches(key: LabelKey, match: Mapping[str, str] | None) -> bool:
    if not match:
        return True
    labels = dict(key)
    return all(labels.get(k) == v for k, v in match.items())


def merged_histogram(
    parsed: ParsedSamples, names: Iterable[str], scale: float = 1.0, match: Mapping[str, str] | None = None
) -> Histogram | None:
    """All series of the first base name that has buckets, summed into one histogram (seconds).

    Series whose bucket layout differs from the first series' are left out rather than mixed
    (their buckets cannot be added); series without a +Inf bucket (a truncated payload) too.
    """
    for name in names:
        per_series: dict[LabelKey, dict[float, float]] = {}
        for key, value in parsed.get(name + "_bucket", {}).items():
            if not _matches(key, match):
                continue
            labels = dict(key)
            bound = parse_number(labels.pop("le", "NaN"))  # as the formats write numbers
            if bound is not None and not math.isnan(bound):
                per_series.setdefault(tuple(sorted(labels.items())), {})[bound] = value
        complete = {k: layout for k, layout in per_series.items() if math.inf in layout}
        if not complete:
            continue
        first = min(complete)
        bounds = tuple(sorted(complete[first]))
        chosen = [k for k, layout in complete.items() if tuple(sorted(layout)) == bounds]
        sums = _by_series(parsed.get(name + "_sum", {}))
        counts = _by_series(parsed.get(name + "_count", {}))
        return Histogram(
            bounds=tuple(b * scale for b in bounds),
            cumulative=tuple(math.fsum(complete[k][b] for k in chosen) for b in bounds),
            sum=math.fsum(sums.get(k, math.nan) for k in chosen) * scale,
            count=math.fsum(counts.get(k, complete[k][math.inf]) for k in chosen),
        )
    return None


def _by_series(series: Mapping[LabelKey, float]) -> dict[LabelKey, float]:
    return {tuple(sorted(key)): value for key, value in series.items()}


def newest(parsed: ParsedSamples, *names: str) -> dict[LabelKey, float]:
    """The series of the newest spelling present: deprecated twins of a renamed metric count once."""
    return first_present(parsed, names)
