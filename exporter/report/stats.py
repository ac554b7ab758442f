"""Statistics of per-interval values: window means and the Mann-Whitney U test.

Canary judges (Kayenta, and the tools built on it) compare a baseline and a canary with the
Mann-Whitney U test on the per-interval values of each metric: it assumes no distribution, which
latency quantiles and queue lengths do not follow, and it reads ranks, so one spike cannot carry
it. The test is scipy's (a maintained, tie-corrected implementation with exact small-sample
p-values), not ours.

How many values a side is enough is not a fixed count: the smallest two-sided p-value two samples
of n and m values can reach is 2 / C(n+m, n) (every value of one side above every value of the
other), so 3 values against 3 can never be significant at 5 % while 3 against 5 can. A comparison
whose counts cannot reach SIGNIFICANCE is not judged: it gets no p-value and says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The level below which a difference is significant (two-sided).
SIGNIFICANCE = 0.05


@dataclass(frozen=True)
class WindowValue:
    """A figure over one window: the mean of its per-interval values, and how many there were.

    `mean` is None when the window held no value (missing data is said as such, never 0);
    `unread` says why a window that holds data gave the figure no value (its look-back does not
    fit in it), so that is not mistaken for missing data.
    """

    mean: float | None
    samples: int
    values: tuple[float, ...] = ()
    unread: str = ""

    @classmethod
    def of(cls, values: Sequence[float], unread: str = "") -> WindowValue:
        kept = tuple(v for v in values if math.isfinite(v))
        return cls(sum(kept) / len(kept) if kept else None, len(kept), kept, "" if kept else unread)


def change(before: WindowValue, after: WindowValue) -> tuple[float | None, float | None]:
    """(absolute, relative) change; relative is None from a zero or missing start."""
    if before.mean is None or after.mean is None:
        return None, None
    absolute = after.mean - before.mean
    relative = absolute / abs(before.mean) if before.mean != 0 else None
    return absolute, relative


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p-value of the Mann-Whitney U test with n and m values."""
    if n < 1 or m < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n + m, n))


def judgeable(n: int, m: int) -> bool:
    """Whether n values against m can show a significant difference at all."""
    return smallest_p(n, m) < SIGNIFICANCE


def mann_whitney_p(before: WindowValue, after: WindowValue) -> float | None:
    """Two-sided p-value that both windows' values come from one distribution; None when the counts
    cannot reach SIGNIFICANCE (not judgeable), 1.0 when every value is the same."""
    a, b = before.values, after.values
    if not judgeable(len(a), len(b)):
        return None
    if len(set(a) | set(b)) == 1:
        return 1.0
    # Imported here: scipy costs about a second of import, which every other command (serve
    # included, whose parser lists `report`) would pay at start if it were imported with the module.
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
