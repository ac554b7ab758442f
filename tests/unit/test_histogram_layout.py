"""A histogram assembled through its kept layout is the one assembled bucket by bucket: every
histogram family of every engine capture, and the shapes captures do not have (ranks summed,
duplicate ranks kept once, a group without +Inf, bounds that are no numbers, label sets reordered);
and what the layouts keep stays within their bound."""

from __future__ import annotations

import math
import random

import pytest

from exporter.model import Histogram
from exporter.promtext import LabelKey, ParsedSamples, parse_number, parse_wanted, sample_names
from exporter.sources.engines import MAPPINGS, common
from exporter.sources.engines.common import MODEL_LABELS, model_of, read_histograms
from exporter.sources.engines.histogram_layout import Layouts
from tests.support import ENGINE_FIXTURES


def bucket_by_bucket(
    parsed: ParsedSamples, name: str, scale: float, duplicate_labels: frozenset[str]
) -> dict[str, Histogram]:
    """The reference: each bucket's model, group, rank and bound worked out from its labels."""
    buckets = parsed.get(name + "_bucket", {})
    ignored = set(MODEL_LABELS) | duplicate_labels | {"le"}
    per_group: dict[tuple, dict[float, tuple[tuple[str, ...], float]]] = {}
    for key, value in buckets.items():
        labels = dict(key)
        bound = parse_number(labels.get("le", "NaN"))
        if bound is None or math.isnan(bound):
            continue
        group = (model_of(labels), tuple(sorted((k, v) for k, v in labels.items() if k not in ignored)))
        order = tuple(labels.get(k, "") for k in sorted(duplicate_labels))
        known = per_group.setdefault(group, {}).get(bound)
        if known is None or order < known[0]:
            per_group[group][bound] = (order, value)
    sums = common.reduce_by_model(parsed.get(name + "_sum", {}), "sum", duplicate_labels)
    counts = common.reduce_by_model(parsed.get(name + "_count", {}), "sum", duplicate_labels)
    merged: dict[str, dict[float, float]] = {}
    for (model, _), chosen in per_group.items():
        if math.inf in chosen:
            into = merged.setdefault(model, {})
            for bound, (_, count) in chosen.items():
                into[bound] = into.get(bound, 0.0) + count
    result = {}
    for model, counted in merged.items():
        bounds = tuple(sorted(counted))
        cumulative = tuple(counted[b] for b in bounds)
        result[model] = Histogram(
            tuple(b * scale for b in bounds),
            cumulative,
            sums.get(model, math.nan) * scale,
            counts.get(model, cumulative[-1]),
        )
    return result


def same(a: dict[str, Histogram], b: dict[str, Histogram]) -> bool:
    return repr(sorted(a.items())) == repr(sorted(b.items()))  # NaN sums compare equal as text


def test_every_histogram_of_every_capture_reads_as_bucket_by_bucket() -> None:
    duplicates = {frozenset(), *(getattr(m, "duplicate_labels", frozenset()) for m in MAPPINGS.values())}
    read = 0
    for capture in sorted(ENGINE_FIXTURES.glob("*.prom")):
        text = capture.read_text(encoding="utf-8")
        bases = {n[: -len("_bucket")] for n in sample_names(text) if n.endswith("_bucket")}
        parsed = parse_wanted(text, {base + end for base in bases for end in ("_bucket", "_sum", "_count")})
        for base in sorted(bases):
            for duplicate_labels in duplicates:
                for scale in (1.0, 1e-3):
                    expected = bucket_by_bucket(parsed, base, scale, duplicate_labels)
                    for _ in range(2):  # worked out, then from the kept layout
                        got = read_histograms(parsed, (base,), scale, duplicate_labels)
                        assert same(got, expected), (capture.name, base)
                    read += len(expected)
    assert read > 100  # the captures' histograms were read, not skipped


def series(labels: dict[str, str]) -> LabelKey:
    return tuple(sorted(labels.items()))


def test_ranks_duplicates_incomplete_groups_and_odd_bounds_read_as_bucket_by_bucket() -> None:
    rng = random.Random(7)
    buckets: dict[LabelKey, float] = {}
    for model in ("a", "b"):
        for dp in ("0", "1", "2"):
            for tp in ("1", "0"):  # the higher duplicate rank first: the lowest must still win
                for le in ("0.1", "1.0", "+Inf", "1_0", "zebra"):
                    if model == "b" and dp == "2" and le == "+Inf":
                        continue  # a group without +Inf is left out
                    labels = {"model_name": model, "engine": dp, "tp_rank": tp, "le": le}
                    buckets[series(labels)] = float(rng.randint(0, 99))
    for model in ("a", "b"):
        buckets[series({"model_name": model, "le": "5"})] = 3.0  # a group of its own, no +Inf
    sums = {series({"model_name": m, "engine": d, "tp_rank": "0"}): rng.random() for m in "ab" for d in "012"}
    parsed = {"h_bucket": buckets, "h_sum": sums, "h_count": {}}
    for duplicate_labels in (frozenset(), frozenset({"tp_rank"}), frozenset({"tp_rank", "engine"})):
        expected = bucket_by_bucket(parsed, "h", 1.0, duplicate_labels)
        assert set(expected) == {"a", "b"}
        assert same(read_histograms(parsed, ("h",), 1.0, duplicate_labels), expected)
        assert same(read_histograms(parsed, ("h",), 1.0, duplicate_labels), expected)
        # the same label sets in another order are another layout, read alike
        shuffled = list(buckets.items())
        rng.shuffle(shuffled)
        reordered = {**parsed, "h_bucket": dict(shuffled)}
        assert same(read_histograms(reordered, ("h",), 1.0, duplicate_labels), expected)
    # new counts under the kept layout
    recounted = {**parsed, "h_bucket": {key: value + 1 for key, value in buckets.items()}}
    assert same(
        read_histograms(recounted, ("h",), 1.0, frozenset()), bucket_by_bucket(recounted, "h", 1.0, frozenset())
    )


def test_layouts_forget_everything_before_passing_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    layouts = Layouts(max_layouts=4, max_label_chars=2000)
    monkeypatch.setattr(common, "_LAYOUTS", layouts)
    sizes = []
    for scrape in range(40):  # a target whose label sets change every scrape
        buckets = {series({"model_name": f"m{scrape}", "le": le}): 1.0 for le in ("1", "+Inf")}
        assert read_histograms({"h_bucket": buckets}, ("h",), 1.0, frozenset())[f"m{scrape}"].count == 1.0
        sizes.append(len(layouts))
    assert max(sizes) == 4 and min(sizes[4:]) == 1
    huge = {series({"model_name": "x" * 3000, "le": "+Inf"}): 2.0}
    assert read_histograms({"h_bucket": huge}, ("h",), 1.0, frozenset())["x" * 3000].count == 2.0
    assert len(layouts) == 0  # over the bound alone: read, not kept


def test_a_layout_is_found_by_its_label_sets_objects_and_checked_by_their_content(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    layouts = Layouts()
    monkeypatch.setattr(common, "_LAYOUTS", layouts)

    def scrape(values: tuple[float, float]) -> dict[LabelKey, float]:
        # new label-set objects each time, as a parse without a line cache makes them
        return {series({"model_name": "m", "le": le}): v for le, v in zip(("1", "+Inf"), values, strict=True)}

    first = scrape((1.0, 2.0))
    assert read_histograms({"h_bucket": first}, ("h",), 1.0, frozenset())["m"].cumulative == (1.0, 2.0)
    again = dict(zip(first, (3.0, 5.0), strict=True))  # the same objects, new counts: the kept layout
    assert read_histograms({"h_bucket": again}, ("h",), 1.0, frozenset())["m"].cumulative == (3.0, 5.0)
    assert len(layouts) == 1
    other = scrape((4.0, 6.0))  # equal label sets, other objects: a layout of their own
    assert read_histograms({"h_bucket": other}, ("h",), 1.0, frozenset())["m"].cumulative == (4.0, 6.0)
    assert len(layouts) == 2
    swapped = dict(reversed(list(again.items())))  # the same objects in another order: another tuple
    assert read_histograms({"h_bucket": swapped}, ("h",), 1.0, frozenset())["m"].cumulative == (3.0, 5.0)
