"""Statistics of per-interval values: window means and the Mann-Whitney U test.

Canary judges (Kayenta, and the tools built on it) compare a baseline and a canary with the
Mann-Whitney U test on the per-interval values of each metric: it assumes no distribution, which
latency quantiles and queue lengths do not follow, and it reads ranks, so one spike cannot carry
it. The test is scipy's (a maintained, tie-corrected implementation with exact small-sample
p-values), not ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Below this many values on a side, no p-value is given: a rank test on 2 points says nothing.
MIN_SAMPLES = 3


@dataclass(frozen=True)
class WindowValue:
    """A figure over one window: the mean of its per-interval values, and how many there were.

    `mean` is None when the window held no value (missing data is said as such, never 0).
    """

    mean: float | None
    samples: int
    values: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: Sequence[float]) -> WindowValue:
        kept = tuple(v for v in values if math.isfinite(v))
        return cls(sum(kept) / len(kept) if kept else None, len(kept), kept)


def change(before: WindowValue, after: WindowValue) -> tuple[float | None, float | None]:
    """(absolute, relative) change; relative is None from a zero or missing start."""
    if before.mean is None or after.mean is None:
        return None, None
    absolute = after.mean - before.mean
    relative = absolute / abs(before.mean) if before.mean != 0 else None
    return absolute, relative


def mann_whitney_p(before: WindowValue, after: WindowValue) -> float | None:
    """Two-sided p-value that both windows' values come from one distribution; None when a side has
    fewer than MIN_SAMPLES values or every value is the same (no ranks to compare)."""
    a, b = before.values, after.values
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return None
    if len(set(a) | set(b)) == 1:
        return 1.0
    # Imported here: scipy costs about a second of import, which every other command (serve
    # included, whose parser lists `report`) would pay at start if it were imported with the module.
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
