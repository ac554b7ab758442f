"""exporter.render writes what prometheus_client writes, byte for byte, in both formats."""

from __future__ import annotations

import gzip
import math

import pytest

from exporter import render
from exporter.catalogue import CATALOGUE, MetricSpec
from exporter.exposition import RenderedSnapshot, _render, render_text
from exporter.loop import Snapshot, SourceStatus
from exporter.model import Metric, QuantileSummary, Sample

HOSTILE_VALUES = ["plain", 'quote " inside', "back\\slash", "new\nline", "ünïcødé ✓", "", "a}b{c", 'x="y",z']
VALUES = [0.0, -0.0, 1.0, 3.5, 1e-9, 123456789.0, 1e21, -7.25, math.inf, -math.inf, math.nan, 2**53]


def every_family(hostile: bool) -> list[Metric]:
    """One or more samples of every catalogue family, sharing label dicts as sources do."""
    metrics: list[Metric] = []
    for index, (name, spec) in enumerate(CATALOGUE.items()):
        for copy in range(2):
            value = HOSTILE_VALUES[(index + copy) % len(HOSTILE_VALUES)] if hostile else f"v{copy}"
            labels = {"engine": f"e{copy}", "model": value, "zz_last": "1", "a_first": value}
            number = VALUES[(index + copy) % len(VALUES)]
            if spec.type == "summary":
                quantiles = ((0.5, number), (0.95, math.nan), (0.99, 2.0))
                metrics.append(QuantileSummary(name, labels, quantiles, 10.0, number))
            else:
                metrics.append(Sample(name, labels, number))
                metrics.append(Sample(name, {}, number) if copy else Sample(name, labels, -number))
    return metrics


def snapshot_of(metrics: list[Metric]) -> Snapshot:
    statuses = (SourceStatus("engine", "e0", True, 0.004), SourceStatus("rdma", "", False, 2.25, "timeout"))
    return Snapshot(tuple(metrics), statuses, {("engine", "e0", "parse"): 3, ("rdma", "", "timeout"): 1}, 0.0, 1)


@pytest.mark.parametrize("hostile", [False, True])
def test_both_formats_match_prometheus_client(hostile: bool) -> None:
    snapshot = snapshot_of(every_family(hostile))
    rendered = RenderedSnapshot()
    rendered.publish(snapshot)
    for openmetrics in (False, True):
        reference = _render(snapshot, openmetrics)
        plain, _ = rendered.body(openmetrics, gzipped=False)
        assert plain == reference
        zipped, _ = rendered.body(openmetrics, gzipped=True)
        assert gzip.decompress(zipped) == reference
    assert render_text(snapshot) == _render(snapshot, openmetrics=False)


def test_every_format_is_ready_before_any_scrape_and_empty_before_the_first_snapshot() -> None:
    rendered = RenderedSnapshot()
    assert rendered.body(False, False)[0] == _render(None, openmetrics=False) == b""
    assert rendered.body(True, True)[0] and gzip.decompress(rendered.body(True, True)[0]) == b"# EOF\n"
    rendered.publish(snapshot_of(every_family(False)))
    assert set(rendered._cache) == {(False, False), (False, True), (True, False), (True, True)}


def test_a_family_missing_from_the_catalogue_is_refused() -> None:
    with pytest.raises(KeyError, match="missing from the catalogue"):
        RenderedSnapshot().publish(snapshot_of([Sample("not_a_catalogue_family", {}, 1.0)]))


def test_names_and_help_that_need_escaping_match_prometheus_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """No catalogue family needs escaping today; a future one with a `:` in its name or a quote,
    backslash or newline in its HELP must still render as prometheus_client renders it."""
    name = "llm_test:escaped_total"
    spec = MetricSpec(name, "counter", 'a "quoted" back\\slash and a\nnewline', ("engine",))
    monkeypatch.setitem(CATALOGUE, name, spec)
    snapshot = snapshot_of([Sample(name, {"engine": 'e"0'}, 2.0)])
    rendered = RenderedSnapshot()
    rendered.publish(snapshot)
    for openmetrics in (False, True):
        assert rendered.body(openmetrics, gzipped=False)[0] == _render(snapshot, openmetrics)


def test_label_sets_that_stop_occurring_leave_the_render_cache() -> None:
    """A model replaced now and then (a rollout, a soak's churning engine) brings new label sets;
    the old ones never occur again and must not stay formatted for the life of the process."""
    name, summary = (
        next(n for n, s in CATALOGUE.items() if s.type != "summary"),
        next(n for n, s in CATALOGUE.items() if s.type == "summary"),
    )

    def cached() -> int:
        return len(render._braces) + len(render._quantile_braces)

    steady = [Sample(name, {"engine": f"e{i}", "gpu": str(i)}, 1.0) for i in range(20)]
    rendered = RenderedSnapshot()
    render._braces.clear()
    render._quantile_braces.clear()
    rendered.publish(snapshot_of(steady))
    node = cached()  # the node's own label sets, ours among them
    for model in range(3 * render.CACHE_FLOOR):
        labels = {"engine": "churning", "model": f"model-{model}"}
        churning = [Sample(name, labels, 2.0), QuantileSummary(summary, labels, ((0.5, 1.0),), 3.0, 4.0)]
        snapshot = snapshot_of(steady + churning)
        rendered.publish(snapshot)
        held = cached()
        assert held <= 2 * (node + len(churning)) + render.CACHE_FLOOR, f"{held} label sets after {model + 1}"
    for openmetrics in (False, True):  # rendered right across the clears
        assert rendered.body(openmetrics, gzipped=False)[0] == _render(snapshot, openmetrics)
