"""The validation matrix: every figure at every level, per window, with its change and its test.

A row is one figure of one group (the cluster, a model, an engine). Its value in a window is the
mean of the figure's per-interval values there (one per step); the change is the incident against
the baseline, and with `--after` the after window against the baseline as well. The p-value is
the Mann-Whitney U test of the two windows' per-interval values, shown with their counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exporter.report.queries import Figure, Level
from exporter.report.stats import SIGNIFICANCE, WindowValue, change, judgeable, mann_whitney_p

GroupKey = tuple[str, str, str]  # (cluster, model, engine); "" where the level has none


@dataclass(frozen=True)
class Comparison:
    absolute: float | None
    relative: float | None
    p_value: float | None
    #: both windows hold enough values for the test to show a difference (stats.judgeable)
    judged: bool = False
    #: the counts compared, for what the pages say of a comparison not judged
    samples: tuple[int, int] = (0, 0)

    @classmethod
    def between(cls, before: WindowValue, after: WindowValue) -> Comparison:
        absolute, relative = change(before, after)
        return cls(
            absolute,
            relative,
            mann_whitney_p(before, after),
            judgeable(before.samples, after.samples),
            (before.samples, after.samples),
        )

    @property
    def significant(self) -> bool:
        """Judged, and the test says the windows differ."""
        return self.p_value is not None and self.p_value < SIGNIFICANCE


@dataclass(frozen=True)
class Row:
    level: Level
    group: GroupKey
    figure: Figure
    values: Mapping[str, WindowValue]  # window name -> value
    incident: Comparison  # incident vs baseline
    after: Comparison | None  # after vs baseline, with --after

    def value(self, window: str) -> float | None:
        v = self.values.get(window)
        return v.mean if v is not None else None


def group_key(level: Level, labels: Mapping[str, str], cluster_label: str) -> GroupKey:
    cluster = labels.get(cluster_label, "")
    if level == "cluster":
        return (cluster, "", "")
    if level == "model":
        return (cluster, labels.get("model", ""), "")
    return (cluster, labels.get("model", ""), labels.get("engine", ""))


def build_rows(
    figure: Figure,
    level: Level,
    per_window: Mapping[str, Mapping[GroupKey, list[float]]],
    has_after: bool,
    unread: Mapping[str, str] | None = None,
) -> list[Row]:
    """Rows of one figure at one level from its per-window values by group; a group missing from a
    window gets an empty value there: no data, or `unread[window]` where the figure could not be
    read in that window at all."""
    unread = unread or {}
    groups = sorted({key for values in per_window.values() for key in values})
    rows = []
    for key in groups:
        if level == "engine" and not key[2]:
            continue  # an engine histogram without the exporter's `engine` label: the model row has it
        values = {
            name: WindowValue.of(by_group.get(key, []), unread.get(name, "")) for name, by_group in per_window.items()
        }
        empty = WindowValue(None, 0)
        base = values.get("baseline", empty)
        rows.append(
            Row(
                level,
                key,
                figure,
                values,
                Comparison.between(base, values.get("incident", empty)),
                Comparison.between(base, values.get("after", empty)) if has_after else None,
            )
        )
    return rows
