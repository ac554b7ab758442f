"""`report` against a real Prometheus holding the simulator's `prompt-growth` case.

The scenario runs offline with the exporter reading it (`exporter_view=True`), its snapshots are
backfilled into a real Prometheus (OpenMetrics with timestamps → promtool blocks) together with
the engines' own latency histograms and configuration, as a Prometheus scraping the exporter
and the engines holds them, and the report reads that Prometheus with its default flags over
the scenario's phases. The figures are checked against the same PromQL evaluated by Prometheus
itself as a subquery, and the HTML is opened in a real headless Chromium.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from exporter.catalogue import LATENCY_FAMILIES
from exporter.loop import Snapshot
from exporter.monitoring.config import LabelNames
from exporter.monitoring.records import engine_histogram_names
from exporter.report.build import Report, build_report
from exporter.report.prometheus import PrometheusClient, PrometheusOptions
from exporter.report.queries import QueryContext, all_figures
from exporter.report.render_json import document
from exporter.report.render_pages import render_html, render_markdown
from exporter.report.windows import Window
from exporter.simulate.case_review import close_case_review, phase_windows
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import load_scenario
from tests.integration.headless_chromium import PAGE_HOST, LoggingProxy, chromium, console_lines
from tests.integration.monitoring_stack import Prometheus
from tests.integration.report_backfill import SCRAPE_LABELS, backfilled_prometheus, write_openmetrics
from tests.support import REPO

# The exporter collects every 10 s, and the engines are read as often: a scrape interval.
INTERVAL = 10.0
SELECTOR = 'job="llm-bottleneck-exporter"'
SCENARIO = load_scenario("prompt-growth")
DURATION = SCENARIO.duration_seconds
# The case review's windows are the scenario's phases, whole: baseline, incident, remedied.
PHASES = phase_windows(SCENARIO, DURATION)
HOST = "sim-a100-node-0"
# Engine series a Prometheus scraping the engines stores: the latency histograms the recording
# rules prefer to the exporter's quantiles, and vLLM's cache configuration.
ENGINE_SERIES = (
    "vllm:cache_config_info",
    *(f"{n}_bucket" for k in LATENCY_FAMILIES for n in engine_histogram_names(k)),
)
# The offline run (12 simulated minutes read by the exporter every 10 s) takes tens of seconds on
# an idle CI core and several minutes on a loaded one.
pytestmark = pytest.mark.timeout(900)


def _run_scenario() -> tuple[list[tuple[float, Snapshot]], dict[str, list[tuple[float, dict[str, str], float]]]]:
    """prompt-growth offline, read every INTERVAL by the exporter's own sources (as `run_offline`
    with `exporter_view=True` does) and by a Prometheus scraping each engine (ENGINE_SERIES)."""
    node = SimulatedNode(SCENARIO)
    view = ExporterView(node, interval=INTERVAL)
    snapshots = []
    engine: dict[str, list[tuple[float, dict[str, str], float]]] = {}
    try:
        for t, snapshot in view.run(DURATION, INTERVAL):
            snapshots.append((t, snapshot))
            for replica in node.replicas:
                text = requests.get(f"{view.server.url}/engine/{replica.index}/metrics", timeout=30).text
                # The labels a scrape config gives the engines' target (the cluster's, as the exporter's).
                target = {
                    "job": "vllm",
                    "cluster": SCRAPE_LABELS["cluster"],
                    "instance": f"{HOST}:{8000 + replica.index}",
                }
                for family in text_string_to_metric_families(text):
                    for sample in family.samples:
                        if sample.name in ENGINE_SERIES:
                            engine.setdefault(sample.name, []).append((t, {**sample.labels, **target}, sample.value))
    finally:
        view.close()
    return snapshots, engine


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, float]]:
    snapshots, engine = _run_scenario()
    # Whole minutes, a few hours back: inside the default retention, outside the head block.
    t0 = math.floor((time.time() - 3 * 3600) / 60) * 60
    workdir = tmp_path_factory.mktemp("report-prometheus")
    openmetrics = workdir / "prompt-growth.om"
    labels = {**SCRAPE_LABELS, "instance": f"{HOST}:9400"}
    with openmetrics.open("w", encoding="utf-8") as out:
        write_openmetrics(
            out,
            [(t0 + t, s.metrics) for t, s in snapshots],
            labels,
            {name: [(t0 + t, labels, v) for t, labels, v in points] for name, points in engine.items()},
        )
    prometheus = backfilled_prometheus(openmetrics, workdir)
    try:
        yield prometheus, t0
    finally:
        prometheus.close()


def _windows(t0: float, after: bool = True) -> list[Window]:
    return [Window(name, t0 + a, t0 + b) for name, (a, b) in PHASES.items() if after or name != "after"]


def _flags(t0: float, after: bool = True) -> list[str]:
    return [f for w in _windows(t0, after) for f in (f"--{w.name}", f"{w.start:.0f}/{w.end:.0f}")]


@pytest.fixture(scope="module")
def report(backfilled: tuple[Prometheus, float]) -> Report:
    prometheus, t0 = backfilled
    client = PrometheusClient(PrometheusOptions(prometheus.url))
    try:
        return build_report(client, SELECTOR, _windows(t0))
    finally:
        client.close()


def _cli(prometheus: Prometheus, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", "report", "--prometheus", prometheus.url, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_with_default_flags_over_the_phases_the_prompt_is_the_cause_and_the_fix_worked(
    backfilled: tuple[Prometheus, float],
) -> None:
    """The case review as a newcomer runs it: default flags, the scenario's phases as windows."""
    prometheus, t0 = backfilled
    done = _cli(prometheus, *_flags(t0), "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["primary"]["cluster"] == {"baseline": "none", "incident": "decode_memory_bandwidth", "after": "none"}
    engines = doc["primary"]["engines"]
    assert len(engines) == 8
    incident = [e["windows"]["incident"]["primary"] for e in engines]
    baseline = [e["windows"]["baseline"]["primary"] for e in engines]
    assert incident.count("decode_memory_bandwidth") >= 6, incident
    assert baseline.count("none") >= 6, baseline
    # Every rate's range fits in every window, and no figure mixes in the phase before.
    rate_seconds = float(doc["rate_interval"].rstrip("s"))
    assert rate_seconds < min(b - a for a, b in PHASES.values()) / 3, doc["rate_interval"]
    # The prompt grew as the scenario says (200 -> 800 tokens: 4x), read from its phases.
    prompt = {name: phase.workload.prompt_tokens.mean for name, phase in _phase_by_window().items()}
    expected = prompt["incident"] / prompt["baseline"]
    row = _row(doc, "mean_prompt_tokens")
    ratio = row["windows"]["incident"]["value"] / row["windows"]["baseline"]["value"]
    assert abs(ratio / expected - 1) < 0.15, (ratio, expected)
    assert row["incident_vs_baseline"]["significant"] and row["windows"]["baseline"]["samples"] >= 5
    # The prompt length is the only cause listed as explaining the incident; the completions that
    # fell with it are an effect, and the remedy's settings are what the fix changed.
    explaining = [c for c in doc["causes"] if c["explains"]]
    assert [c["figure"] for c in explaining] == ["mean_prompt_tokens"], doc["causes"]
    assert abs(explaining[0]["ratio"] / expected - 1) < 0.15 and explaining[0]["p_value"] < 0.05
    config = [c for c in doc["causes"] if c["kind"] == "engine_config"]
    assert any("enable_prefix_caching: False → True (8 engines, after window)" in c["summary"] for c in config), config
    assert all(c["window"] == "after" and not c["explains"] for c in config), config  # the release changed none
    assert doc["fix"]["worked"] is True, doc["fix"]
    assert doc["fix"]["after_stage"] == "none"
    walk = {s["stage"]: s for s in doc["walk"]}
    assert walk["decode_memory_bandwidth"]["verdict"] == "became the bottleneck"
    assert any("not idle capacity" in line for line in walk["decode_memory_bandwidth"]["not"])
    assert doc["actions"] and "prefix caching" in doc["actions"][0]
    # Every figure carries its sample counts, and the headline ones are judged.
    assert all(all("samples" in w for w in r["windows"].values()) for r in doc["matrix"])
    for key in ("request_rate", "e2e_p99", "ttft_p99", "itl_p50", "waiting"):
        assert _row(doc, key)["incident_vs_baseline"]["judged"], key
    assert doc["warnings"] == [], doc["warnings"]


def _phase_by_window() -> dict:
    starts = {name: a for name, (a, _) in PHASES.items()}
    return {name: SCENARIO.phase_at(start) for name, start in starts.items()}


def _row(doc: dict, key: str, level: str = "cluster") -> dict:
    return next(r for r in doc["matrix"] if r["figure"] == key and r["level"] == level)


def test_a_window_too_short_to_judge_is_refused_naming_the_shortest(backfilled: tuple[Prometheus, float]) -> None:
    prometheus, t0 = backfilled
    start = t0 + PHASES["baseline"][0] + 60
    done = _cli(prometheus, "--baseline", f"{start:.0f}/{start + 25:.0f}", *_flags(t0, after=False)[2:])
    assert done.returncode == 2
    # 10 s scrapes: a 20 s step, a 30 s rate (the step plus a scrape), then 3 values 20 s apart.
    assert done.stderr.count("\n") == 1, done.stderr
    assert "--baseline: a window of 25 s (Prometheus holds data for 10 s of it)" in done.stderr, done.stderr
    assert "the shortest window the report can judge holds 70 s" in done.stderr, done.stderr


def test_without_after_there_is_no_fix_verdict(backfilled: tuple[Prometheus, float]) -> None:
    prometheus, t0 = backfilled
    client = PrometheusClient(PrometheusOptions(prometheus.url))
    try:
        report = build_report(client, SELECTOR, _windows(t0, after=False), plots=False)
    finally:
        client.close()
    doc = document(report)
    assert doc["fix"] is None and set(doc["windows"]) == {"baseline", "incident"}
    assert all(row["after_vs_baseline"] is None for row in doc["matrix"])


def test_every_matrix_figure_equals_prometheus_own_subquery(
    report: Report, backfilled: tuple[Prometheus, float]
) -> None:
    """Each window value is the mean of the figure's values at its instants, `last - k * spacing`
    back to the first whose look-back fits in the window; Prometheus computes the same with
    `avg_over_time((expr)[range:spacing])` at `last`, whose steps are the multiples of the spacing
    (the phases' edges are: the checks below say how many rows that covers)."""
    prometheus, _ = backfilled
    ctx = QueryContext(SELECTOR, report.rate_interval, LabelNames())
    figures = {f.key: f for f in all_figures()}
    checked = asked = 0
    for row in report.rows:
        expr = figures[row.figure.key].build(ctx, row.level)
        assert expr is not None
        for window in report.windows:
            value = row.values[window.name]
            plan = report.timing.plan(row.figure.reads, window, report.extents[window.name])
            if plan is None:
                assert value.mean is None and value.unread, (row.figure.key, window.name)
                continue
            if plan.last % plan.spacing:
                continue
            span = f"{plan.last - plan.first + 1:.0f}s:{plan.spacing:.0f}s"
            found = {}
            for fn in ("avg_over_time", "count_over_time"):
                query = f"{fn}(({expr})[{span}])"
                for item in _instant(prometheus, query, plan.last):
                    labels = item["metric"]
                    group = (
                        labels.get("cluster", ""),
                        labels.get("model", "") if row.level != "cluster" else "",
                        labels.get("engine", "") if row.level == "engine" else "",
                    )
                    if group == row.group:
                        found[fn] = float(item["value"][1])
                asked += 1
            if value.mean is None:
                assert found.get("count_over_time", 0) == 0, (row.figure.key, row.level, row.group, window.name)
                continue
            assert value.samples == found["count_over_time"], (row.figure.key, row.level, row.group, window.name)
            assert value.mean == pytest.approx(found["avg_over_time"], rel=1e-9, abs=1e-12), (
                row.figure.key,
                window.name,
            )
            checked += 1
    assert checked > 300, (asked, checked)


def _instant(prometheus: Prometheus, query: str, at: float) -> list[dict]:
    answer = requests.get(f"{prometheus.url}/api/v1/query", params={"query": query, "time": f"{at:.3f}"}, timeout=30)
    return answer.json()["data"]["result"]


def test_missing_data_is_said_and_a_real_zero_is_zero(report: Report) -> None:
    """Prefix caching is off before the remedy: vLLM exports no hit ratio, and the report says so;
    no preemption in the baseline is a real 0, and the change from it an amount."""
    row = next(r for r in report.rows if r.level == "cluster" and r.figure.key == "prefix_cache_hit_ratio")
    assert row.values["baseline"].mean is None and row.values["baseline"].samples == 0
    assert row.values["after"].mean is not None and row.values["after"].mean > 0
    markdown, _ = render_markdown(report, None)
    line = next(line for line in markdown.splitlines() if line.startswith("| Prefix-cache hit ratio"))
    assert "no data (n=0)" in line and "0.0%" not in line.split("|")[2]
    # No cross-node traffic in this scenario: RDMA congestion is 0 in every window, and unchanged.
    congestion = next(line for line in markdown.splitlines() if line.startswith("| RDMA congestion")).split("|")
    assert [cell.strip().split(" (n=")[0] for cell in congestion[2:5]] == ["0/s"] * 3, congestion
    assert congestion[5].strip() == "no change", congestion
    preemptions = next(line for line in markdown.splitlines() if line.startswith("| Preemptions/s")).split("|")
    if preemptions[2].strip().startswith("0/s "):  # none in the baseline: the change is an amount
        assert preemptions[5].strip().startswith("+") and preemptions[5].strip().endswith("/s"), preemptions


def test_html_renders_in_headless_chromium_offline(report: Report, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(report), encoding="utf-8")
    # A probe copy measures every plot as laid out by the browser and says so on the console.
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.read_text(encoding="utf-8").replace(
            "</body>",
            "<script>addEventListener('load', () => { const out = [...document.querySelectorAll('figure.plot')]"
            ".map(f => { const s = f.querySelector('svg').getBoundingClientRect(); return [f.id, s.x, s.y + scrollY,"
            " s.width, s.height, f.querySelectorAll('svg path').length]; });"
            " document.body.dataset.plots = JSON.stringify(out);"
            " document.body.dataset.height = document.documentElement.scrollHeight;"
            " console.log('probe-ok', out.length); });</script></body>",
        ),
        encoding="utf-8",
    )
    proxy = LoggingProxy(tmp_path)
    try:
        dom = chromium(
            proxy, tmp_path / "profile-dom", f"http://{PAGE_HOST}/probe.html", "--dump-dom", "--window-size=1280,900"
        )
        probe_requests = list(proxy.requests)
        proxy.requests.clear()
        plots = json.loads(re.search(r'data-plots="([^"]*)"', dom.stdout).group(1).replace("&quot;", '"'))  # type: ignore[union-attr]
        height = int(re.search(r'data-height="(\d+)"', dom.stdout).group(1))  # type: ignore[union-attr]
        shot = tmp_path / "report.png"
        chromium(
            proxy,
            tmp_path / "profile-shot",
            f"http://{PAGE_HOST}/report.html",
            f"--screenshot={shot}",
            f"--window-size=1280,{height}",
        )
        shot_requests = list(proxy.requests)
    finally:
        proxy.close()
    console = console_lines(dom.stderr)
    assert any("probe-ok" in line for line in console), dom.stderr[-3000:]  # the console is captured ...
    assert [line for line in console if "probe-ok" not in line] == []  # ... and holds nothing else
    # Nothing but the page itself (and the favicon Chromium asks every site for) was requested;
    # the browser's own services (component updates, time, sign-in) are its traffic, not the page's.
    for made, path in ((probe_requests, "probe.html"), (shot_requests, "report.html")):
        allowed = (f"GET http://{PAGE_HOST}/{path}", f"GET http://{PAGE_HOST}/favicon.ico")
        extra = [r for r in made if r not in allowed and _host(r) not in CHROMIUM_OWN_HOSTS]
        assert extra == [] and allowed[0] in made, made
    ids = {p[0] for p in plots}
    assert {"plot-timeline", "plot-e2e", "plot-ttft", "plot-gpu", "plot-kv", "plot-prompt"} <= ids, ids
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    for plot_id, x, y, width, height_px, paths in plots:
        assert width > 600 and height_px > 150 and paths > 20, (plot_id, width, height_px, paths)
        region = image.crop((int(x), int(y), int(x + width), int(y + height_px)))
        colours = region.getcolors(maxcolors=1 << 16)
        # Drawn: many colours (lines, bands, text), not a blank or single-colour box.
        assert colours is None or len(colours) > 50, (plot_id, len(colours or []))
        non_white = sum(count for count, rgb in (colours or []) if rgb != (255, 255, 255))
        assert colours is None or non_white > 0.05 * width * height_px, plot_id
    html = page.read_text(encoding="utf-8")
    # Statically too: no script, no source attribute, no stylesheet import, and no URL but the
    # SVG and XLink namespace names.
    assert "<script" not in html and " src=" not in html and "@import" not in html
    assert not re.search(r"url\((?!#)", html)  # only references inside the page (SVG clip paths)
    namespaces = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink", report.prometheus}  # the last as text
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= namespaces


CHROMIUM_OWN_HOSTS = {
    "update.googleapis.com",
    "clients2.google.com",
    "accounts.google.com",
    "clientservices.googleapis.com",
    "optimizationguide-pa.googleapis.com",
    "safebrowsingohttpgateway.googleapis.com",
    "content-autofill.googleapis.com",
}


def _host(request_line: str) -> str:
    """`CONNECT host:443` or `GET http://host/path` -> host."""
    target = request_line.split(" ", 1)[1]
    return target.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]


def test_markdown_refers_to_svg_images_it_writes(report: Report, tmp_path: Path) -> None:
    out = tmp_path / "ticket.md"
    text, images = render_markdown(report, out)
    assert images, "no plot written"
    for path, svg in images.items():
        assert path.parent == tmp_path and f"]({path.name})" in text
        assert svg.lstrip().startswith("<?xml") and "<path" in svg
    assert "decode_memory_bandwidth" in text and "the fix worked" in text


def test_selector_matching_nothing_exits_2_with_one_line(backfilled: tuple[Prometheus, float]) -> None:
    prometheus, t0 = backfilled
    done = _cli(prometheus, *_flags(t0), "--selector", '{model="no-such-model"}')
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "matches no llm_engine_up series" in done.stderr, done.stderr


def test_the_demo_writes_the_case_review_of_its_run_when_it_stops(
    backfilled: tuple[Prometheus, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `demo --report FILE --prometheus-data DIR` does when it stops, over this Prometheus: the
    report written over the phases, and the commands to read it again printed."""
    prometheus, t0 = backfilled
    out = tmp_path / "case-review.json"
    args = argparse.Namespace(report=str(out), prometheus_data=str(tmp_path / "kept"))
    # The backfill's clock starts with the scenario, where the demo's starts after the warm-up.
    close_case_review(args, dataclasses.replace(SCENARIO, warmup_seconds=0.0), t0, DURATION, prometheus.url)
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["fix"]["worked"] and [c["figure"] for c in doc["causes"] if c["explains"]] == ["mean_prompt_tokens"]
    assert f"case review of this run written to {out}:" in printed
    a, b = PHASES["incident"]
    assert f"--incident {t0 + a:.0f}/{t0 + b:.0f}" in printed
    assert f"--storage.tsdb.path={tmp_path / 'kept'}" in printed and "--prometheus http://127.0.0.1:9090" in printed
