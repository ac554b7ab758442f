"""The case review of one slice: `report --slice tenant=team-a` adds that slice's own figures.

A slice is a tenant, a LoRA adapter or a priority class (docs/metrics.md, Slices). The matrix's
figures are the engine's, shared by every slice; these rows are the slice's: its SLO attainment
and goodput (each SLO dimension's lowest and sum), its waiting requests and its queueing score,
compared between the windows like every other row. `other` is a slice too (the values folded past
the bound).
"""

from __future__ import annotations

from exporter.monitoring.promql import series
from exporter.report.queries import Builder, Figure, Level, QueryContext
from exporter.settings import SLICE_DIMENSIONS


def parse_slice(text: str) -> tuple[str, str]:
    """`tenant=team-a` → ("tenant", "team-a"); ValueError naming what is wrong."""
    dimension, sep, value = text.partition("=")
    if not sep or not value:
        raise ValueError(f"--slice: {text!r} is not DIMENSION=VALUE (tenant=team-a)")
    if dimension not in SLICE_DIMENSIONS:
        raise ValueError(f"--slice: {dimension!r} is not a slice dimension ({', '.join(SLICE_DIMENSIONS)})")
    if '"' in value or "\\" in value:
        raise ValueError(f"--slice: {value!r} holds a quote or a backslash")
    return dimension, value


def _of(family: str, op: str, chosen: tuple[str, str], *extra: str) -> Builder:
    dimension, value = chosen

    def build(ctx: QueryContext, level: Level) -> str:
        selected = series(family, ctx.selector, f'slice_by="{dimension}"', f'slice="{value}"', *extra)
        return f"{op} by ({ctx.grouping(level)}) ({selected})"

    return build


def slice_figures(chosen: tuple[str, str] | None) -> tuple[Figure, ...]:
    """The rows of one slice, none without `--slice`."""
    if chosen is None:
        return ()
    name = f"{chosen[0]} {chosen[1]}"
    return (
        Figure(
            "slice_attainment",
            f"SLO attainment, {name} (lowest dimension)",
            "ratio",
            "higher",
            _of("llm_slo_slice_attainment_ratio", "min", chosen),
        ),
        Figure(
            "slice_goodput",
            f"Goodput, {name}",
            "req/s",
            "higher",
            _of("llm_slo_slice_goodput_requests_per_second", "sum", chosen),
        ),
        Figure(
            "slice_waiting",
            f"Waiting requests, {name}",
            "requests",
            "lower",
            _of("llm_engine_slice_requests_waiting", "sum", chosen),
        ),
        Figure(
            "slice_queueing",
            f"Queueing score, {name}",
            "ratio",
            "lower",
            _of("llm_bottleneck_slice_score", "max", chosen, 'stage="queueing"'),
        ),
    )
