"""The case review of one slice: `report --slice tenant=team-a` adds that slice's own figures.

A slice is a tenant, a LoRA adapter or a priority class (docs/metrics.md, Slices). The matrix's
figures are the engine's, shared by every slice; these rows are the slice's: its SLO attainment
and goodput (the lowest SLO dimension's), its waiting requests and its queueing score, compared
between the windows like every other row. `other` is a slice too (the values folded past the
bound). Attainment and goodput are read as the matrix's SLA attainment is: cluster-wide at the
measuring point nearest the client that has the slice (the gateway, else the engines), per model
and engine at the engines; both are the exporter's figures over its own window.
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


def _matchers(chosen: tuple[str, str]) -> tuple[str, str]:
    return f'slice_by="{chosen[0]}"', f'slice="{chosen[1]}"'


def _of(family: str, op: str, chosen: tuple[str, str], *extra: str) -> Builder:
    def build(ctx: QueryContext, level: Level) -> str:
        return f"{op} by ({ctx.grouping(level)}) ({series(family, ctx.selector, *_matchers(chosen), *extra)})"

    return build


def _at_point(family: str, op: str, chosen: tuple[str, str]) -> Builder:
    """Per SLO and dimension `op` over the slice's series at one measuring point (the gateway's where
    it has them, cluster-wide), then the lowest dimension."""

    def build(ctx: QueryContext, level: Level) -> str:
        by = f"{ctx.grouping(level)}, slo, dimension"

        def at(point: str) -> str:
            measured_at = f'measured_at="{point}"'
            return f"{op} by ({by}) ({series(family, ctx.selector, *_matchers(chosen), measured_at)})"

        points = ("gateway", "engine") if level == "cluster" else ("engine",)
        return f"min by ({ctx.grouping(level)}) (\n" + f"\nor on ({by})\n".join(at(p) for p in points) + "\n)"

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
            _at_point("llm_slo_slice_attainment_ratio", "min", chosen),
            reads="windowed",
        ),
        Figure(
            "slice_goodput",
            f"Goodput, {name} (lowest dimension)",
            "req/s",
            "higher",
            _at_point("llm_slo_slice_goodput_requests_per_second", "sum", chosen),
            reads="windowed",
        ),
        # Gauges of now: the slice's queue, and the queueing score worked out from it alone.
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
