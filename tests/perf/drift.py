"""How the soaks judge drift: one set of budgets and rules for tests/perf/soak.py, whether it runs
3 hours of rounds (scripts/test, last) or 72.

A soak measures two stretches of an exporter's life, an early one and a late one (a `Window`
each), and `judge` compares them:

* RSS: the late mean at most 5 % above the early mean. The soaked exporter's RSS is ~110 MB, so
  5 % is ~5.5 MB; over the 72-hour soak's 51,840 rounds that is ~100 bytes a round. A leak that
  grows per round shows far above it, and the DaemonSet's 256 MiB limit is over twice the RSS.
  RSS does not depend on the machine's load, so a few samples suffice (at least 5 a window).
* Open descriptors: the late median at most one above the early median. A connection in flight
  (a scrape being answered, a fetch from a target) is open in about half of the samples of a
  steady exporter, so the median sits on either side of it by chance (21 in one hour, 22 in the
  next); a descriptor leaked every thousand rounds raises it by fifty over 72 hours.
* Threads: the late median not above the early median (their number does not move with the
  traffic; one leaked every thousand rounds raises it by fifty).
* /metrics p99 latency: at most 25 % above the early one, or less than 1 ms above it (below what
  a shared 2-core machine's scheduler adds), or not told apart from it by the scrapes measured. A
  p99 from n scrapes is the (n/100)th slowest; with fewer than 1,000 scrapes a window that is a
  handful of scrapes, one stalled timeslice moves it by half (a 3-minute run once read 2.9-6.7 ms
  with no trend), so fewer is "not judged". Even from 1,400 scrapes the 99th percentile lies, with
  90 % confidence, anywhere from the 22nd to the 8th slowest (the order statistics' binomial
  interval), and in the soak's tail (scrapes that wait on the collection's hold of the interpreter,
  the p99 some twenty times the median) that spans about a third of the figure: two runs of one
  exporter read over +25 % one time in ten (a 3-hour CI soak read +25.5 % where the run before,
  on the same code, read -0.0 %). So a late p99 over budget is a finding when its 90 % interval lies
  wholly above the early one's: for such a tail, never in 500 simulated pairs of one exporter,
  and four times in five for an exporter twice as slow (tests/unit/test_soak_drift.py).
* Collection time (the exporter's own llm_exporter_collect_duration_seconds, summed over the
  targets that answer at once): the late median at most 25 % or 5 ms above the early one.
* Failed scrapes: none, anywhere in the run.

A figure with too few samples is reported as "not judged" with the reason, never as "ok"; any
figure over budget fails the run.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

RSS_BUDGET = 0.05
P99_BUDGET = 0.25
P99_FLOOR_SECONDS = 0.001
P99_MIN_SCRAPES = 1000
COLLECT_BUDGET = 0.25
COLLECT_FLOOR_SECONDS = 0.005
MIN_SAMPLES = 5
DESCRIPTOR_SLACK = 1  # a connection in flight, open in about half of the samples

OK, OVER, NOT_JUDGED = "ok", "OVER BUDGET", "not judged"


@dataclass
class Window:
    """What one stretch of one exporter's life measured: process figures sampled now and then,
    the latency of every /metrics scrape in it."""

    label: str
    rss_mb: list[float] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    collect_seconds: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    name: str
    early: str
    late: str
    budget: str
    status: str
    reason: str = ""


def p99(values: Sequence[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def p99_interval(values: Sequence[float], z: float = 1.645) -> tuple[float, float]:
    """Where the 99th percentile of what `values` sample lies, with 90 % confidence (z = 1.645):
    between two of their order statistics, the ranks from the normal approximation to the binomial
    count of values below it (distribution-free)."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return float("nan"), float("nan")
    centre, spread = 0.99 * n, z * math.sqrt(n * 0.99 * 0.01)
    low, high = math.floor(centre - spread), math.ceil(centre + spread)
    return ordered[max(0, low - 1)], ordered[min(n - 1, high - 1)]


def _few(early: Sequence[float], late: Sequence[float], least: int, what: str) -> str:
    count = min(len(early), len(late))
    return f"{count} {what} in a window, {least} needed" if count < least else ""


def _rss(early: Window, late: Window) -> Verdict:
    budget = f"< +{RSS_BUDGET:.0%}"
    few = _few(early.rss_mb, late.rss_mb, MIN_SAMPLES, "samples")
    if few:
        return Verdict("RSS", "-", "-", budget, NOT_JUDGED, few)
    before, after = statistics.fmean(early.rss_mb), statistics.fmean(late.rss_mb)
    growth = after / before - 1
    return Verdict(
        "RSS", f"{before:.1f} MB", f"{after:.1f} MB ({growth:+.1%})", budget, OK if growth < RSS_BUDGET else OVER
    )


def _no_growth(name: str, early: Sequence[int], late: Sequence[int], slack: int = 0) -> Verdict:
    budget = f"median, at most +{slack}" if slack else "median, no growth"
    few = _few(early, late, MIN_SAMPLES, "samples")
    if few:
        return Verdict(name, "-", "-", budget, NOT_JUDGED, few)
    before, after = statistics.median(early), statistics.median(late)
    figure = "{:g} (max {})"
    return Verdict(
        name,
        figure.format(before, max(early)),
        figure.format(after, max(late)),
        budget,
        OK if after <= before + slack else OVER,
    )


def _latency(
    name: str, early: Sequence[float], late: Sequence[float], statistic: str, ratio: float, floor: float, least: int
) -> Verdict:
    budget = f"< +{ratio:.0%} or < +{floor * 1000:g} ms"
    few = _few(early, late, least, "scrapes" if statistic == "p99" else "samples")
    if few:
        return Verdict(name, "-", "-", budget, NOT_JUDGED, few)
    measure = p99 if statistic == "p99" else statistics.median
    before, after = measure(early), measure(late)
    drift = after / before - 1 if before > 0 else float("inf")
    ok = drift < ratio or after - before < floor
    reason = ""
    if not ok and statistic == "p99":
        (_, early_high), (late_low, late_high) = p99_interval(early), p99_interval(late)
        if late_low <= early_high:
            ok = True
            reason = (
                f"not told apart: the late p99 lies in {late_low * 1000:.2f}-{late_high * 1000:.2f} ms, "
                f"the early one up to {early_high * 1000:.2f} ms"
            )
    before_text, after_text = f"{before * 1000:.2f} ms", f"{after * 1000:.2f} ms ({drift:+.1%})"
    return Verdict(name, before_text, after_text, budget, OK if ok else OVER, reason)


def judge(leak: tuple[Window, Window], speed: tuple[Window, Window], failed_scrapes: int) -> list[Verdict]:
    """`leak`: the early and late windows of one exporter (RSS, descriptors, threads); `speed`:
    the windows whose latencies and collection times are compared (the same pair, or a fresh
    exporter beside the old one over the same minutes, as the 72-hour soak does)."""
    (early, late), (fast_early, fast_late) = leak, speed
    return [
        _rss(early, late),
        _no_growth("open descriptors", early.fds, late.fds, DESCRIPTOR_SLACK),
        _no_growth("threads", early.threads, late.threads),
        _latency(
            "/metrics p99",
            fast_early.latencies,
            fast_late.latencies,
            "p99",
            P99_BUDGET,
            P99_FLOOR_SECONDS,
            P99_MIN_SCRAPES,
        ),
        _latency(
            "collection (median)",
            fast_early.collect_seconds,
            fast_late.collect_seconds,
            "median",
            COLLECT_BUDGET,
            COLLECT_FLOOR_SECONDS,
            MIN_SAMPLES,
        ),
        Verdict("failed scrapes", "-", str(failed_scrapes), "none", OK if failed_scrapes == 0 else OVER),
    ]


def print_verdicts(verdicts: Sequence[Verdict], leak: tuple[Window, Window], speed: tuple[Window, Window]) -> int:
    """The table; 1 when a figure is over budget, else 0 (a figure not judged does not pass as ok:
    it says so and why)."""
    print(f"\ndrift: RSS, descriptors, threads {leak[0].label} -> {leak[1].label}; ", end="")
    print(f"latency and collection {speed[0].label} -> {speed[1].label}")
    print(f"  {'figure':20} {'early':>18} {'late':>28}  {'budget':24} verdict")
    for v in verdicts:
        status = f"{v.status} ({v.reason})" if v.reason else v.status
        print(f"  {v.name:20} {v.early:>18} {v.late:>28}  {v.budget:24} {status}")
    return 1 if any(v.status == OVER for v in verdicts) else 0
