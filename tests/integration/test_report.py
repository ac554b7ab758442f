"""`report` against a real Prometheus holding the simulator's `prompt-growth` case.

The scenario runs offline with the exporter reading it (`exporter_view=True`), its snapshots are
backfilled into a real Prometheus (OpenMetrics with timestamps → promtool blocks), and the report
reads that Prometheus. The figures are checked against the same PromQL evaluated by Prometheus
itself as a subquery, and the HTML is opened in a real headless Chromium.
"""

from __future__ import annotations

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

from exporter.loop import Snapshot
from exporter.monitoring.config import LabelNames
from exporter.report.build import Report, build_report
from exporter.report.prometheus import PrometheusClient, PrometheusOptions
from exporter.report.queries import FIGURES_BY_KEY, QueryContext
from exporter.report.render_json import document
from exporter.report.render_pages import render_html, render_markdown
from exporter.report.windows import Window
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode
from exporter.simulate.scenario import load_scenario
from tests.integration.headless_chromium import PAGE_HOST, LoggingProxy, chromium, console_lines
from tests.integration.monitoring_stack import Prometheus
from tests.integration.report_backfill import SCRAPE_LABELS, backfilled_prometheus, write_openmetrics
from tests.support import REPO

# The exporter collects every 10 s (half the cost of its default 5 s, which CI pays once per run);
# the report's step is the same, so every per-interval value is a distinct collection.
INTERVAL = 10.0
STEP = INTERVAL
RATE = "1m"
SELECTOR = 'job="llm-bottleneck-exporter"'
# Seconds of the scenario (phases: baseline 0-120, long-template 120-300, remedied from 300). The
# incident skips the first minute of its phase (the queue builds), the after window the two
# minutes the remedied engines take to drain the backlog.
BASELINE, INCIDENT, AFTER = (30, 120), (200, 300), (450, 600)
DURATION = 600
HOST = "sim-a100-node-0"
# The offline run (10 simulated minutes read by the exporter every 10 s) takes about a minute on
# an idle CI core and several on a loaded one.
pytestmark = pytest.mark.timeout(900)


def _run_scenario() -> tuple[list[tuple[float, Snapshot]], list[tuple[float, dict[str, str]]]]:
    """prompt-growth offline, read every INTERVAL by the exporter's own sources (as `run_offline`
    with `exporter_view=True` does), and every 30 s each engine's `vllm:cache_config_info` as a
    Prometheus scraping the engine would store it."""
    node = SimulatedNode(load_scenario("prompt-growth"))
    view = ExporterView(node, interval=INTERVAL)
    snapshots, configs = [], []
    try:
        for t, snapshot in view.run(DURATION, INTERVAL):
            snapshots.append((t, snapshot))
            if round(t) % 30 == 0:
                for replica in node.replicas:
                    text = requests.get(f"{view.server.url}/engine/{replica.index}/metrics", timeout=30).text
                    line = next(x for x in text.splitlines() if x.startswith("vllm:cache_config_info{"))
                    family = next(text_string_to_metric_families(f"# TYPE vllm:cache_config_info gauge\n{line}\n"))
                    labels = {**family.samples[0].labels, "job": "vllm", "instance": f"{HOST}:{8000 + replica.index}"}
                    configs.append((t, labels))
    finally:
        view.close()
    return snapshots, configs


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Prometheus, float]]:
    snapshots, configs = _run_scenario()
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
            {"vllm:cache_config_info": [(t0 + t, c) for t, c in configs]},
        )
    prometheus = backfilled_prometheus(openmetrics, workdir)
    try:
        yield prometheus, t0
    finally:
        prometheus.close()


def _windows(t0: float, after: bool = True) -> list[Window]:
    spans = {"baseline": BASELINE, "incident": INCIDENT, **({"after": AFTER} if after else {})}
    return [Window(name, t0 + a, t0 + b) for name, (a, b) in spans.items()]


def _flag(t0: float, span: tuple[int, int]) -> str:
    return f"{t0 + span[0]:.0f}/{t0 + span[1]:.0f}"


@pytest.fixture(scope="module")
def report(backfilled: tuple[Prometheus, float]) -> Report:
    prometheus, t0 = backfilled
    client = PrometheusClient(PrometheusOptions(prometheus.url))
    try:
        return build_report(client, QueryContext(SELECTOR, RATE, LabelNames()), _windows(t0), STEP)
    finally:
        client.close()


def _cli(backfilled: tuple[Prometheus, float], *args: str) -> subprocess.CompletedProcess[str]:
    """`report` on the backfilled Prometheus with the baseline and incident windows, and `args`."""
    prometheus, t0 = backfilled
    windows = ["--baseline", _flag(t0, BASELINE), "--incident", _flag(t0, INCIDENT)]
    return subprocess.run(
        [sys.executable, "-m", "exporter", "report", "--prometheus", prometheus.url, *windows, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_names_the_stages_the_cause_and_that_the_fix_worked(backfilled: tuple[Prometheus, float]) -> None:
    _, t0 = backfilled
    done = _cli(
        backfilled,
        "--after", _flag(t0, AFTER),
        "--step", f"{INTERVAL:.0f}s", "--rate-interval", RATE, "--format", "json", "--engine-selector", '{job="vllm"}',
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["primary"]["cluster"] == {"baseline": "none", "incident": "decode_memory_bandwidth", "after": "none"}
    engines = doc["primary"]["engines"]
    assert len(engines) == 8
    incident = [e["windows"]["incident"]["primary"] for e in engines]
    baseline = [e["windows"]["baseline"]["primary"] for e in engines]
    assert incident.count("decode_memory_bandwidth") >= 6, incident
    assert baseline.count("none") >= 6, baseline
    cause = next(c for c in doc["causes"] if c["explains"])
    assert cause["figure"] == "mean_prompt_tokens"
    assert 3.0 <= cause["ratio"] <= 5.0, cause  # 200 -> 800 tokens: about 4x
    assert doc["fix"]["worked"] is True, doc["fix"]
    # The remedy turned prefix caching on, which vLLM exports in its cache configuration.
    config = [c for c in doc["causes"] if c["kind"] == "engine_config"]
    assert any("enable_prefix_caching: False → True (8 engines, after window)" in c["summary"] for c in config), config
    assert not any("incident window" in c["summary"] for c in config), config  # the release changed no setting
    assert doc["fix"]["after_stage"] == "none"
    walk = {s["stage"]: s for s in doc["walk"]}
    assert walk["decode_memory_bandwidth"]["verdict"] == "became the bottleneck"
    assert any("not idle capacity" in line for line in walk["decode_memory_bandwidth"]["not"])
    assert doc["actions"] and "prefix caching" in doc["actions"][0]


def test_without_after_there_is_no_fix_verdict(backfilled: tuple[Prometheus, float]) -> None:
    prometheus, t0 = backfilled
    client = PrometheusClient(PrometheusOptions(prometheus.url))
    try:
        report = build_report(
            client, QueryContext(SELECTOR, RATE, LabelNames()), _windows(t0, after=False), STEP, plots=False
        )
    finally:
        client.close()
    doc = document(report)
    assert doc["fix"] is None and set(doc["windows"]) == {"baseline", "incident"}
    assert all(row["after_vs_baseline"] is None for row in doc["matrix"])


def test_every_matrix_figure_equals_prometheus_own_subquery(
    report: Report, backfilled: tuple[Prometheus, float]
) -> None:
    """Each window value is the mean of the figure's values at the window's steps; Prometheus
    computes the same with `avg_over_time((expr)[range:step])`, which the test asks for."""
    prometheus, _ = backfilled
    ctx = QueryContext(SELECTOR, RATE, LabelNames())
    expected: dict[tuple[str, str, str, tuple[str, str, str]], tuple[float, int]] = {}
    asked = 0
    for key in {row.figure.key for row in report.rows}:
        for level in ("cluster", "model", "engine"):
            expr = FIGURES_BY_KEY[key].build(ctx, level)  # type: ignore[arg-type]
            if expr is None:
                continue
            for window in report.windows:
                # Evaluated at the window's end over (start, end]: the steps start+step ... end.
                span = f"{window.end - window.start - 1:.0f}s:{STEP:.0f}s"
                for fn in ("avg_over_time", "count_over_time"):
                    result = requests.get(
                        f"{prometheus.url}/api/v1/query",
                        params={"query": f"{fn}(({expr})[{span}])", "time": f"{window.end:.3f}"},
                        timeout=30,
                    ).json()["data"]["result"]
                    asked += 1
                    for item in result:
                        labels = item["metric"]
                        group = (
                            labels.get("cluster", ""),
                            labels.get("model", "") if level != "cluster" else "",
                            labels.get("engine", "") if level == "engine" else "",
                        )
                        mean, count = expected.get((key, level, window.name, group), (math.nan, 0))
                        value = float(item["value"][1])
                        expected[(key, level, window.name, group)] = (
                            (value, count) if fn == "avg_over_time" else (mean, int(value))
                        )
    checked = 0
    for row in report.rows:
        for name, value in row.values.items():
            mean, count = expected.get((row.figure.key, row.level, name, row.group), (math.nan, 0))
            if value.mean is None:
                assert count == 0 or math.isnan(mean), (row.figure.key, row.level, row.group, name, mean)
                continue
            assert value.samples == count, (row.figure.key, row.level, row.group, name)
            assert value.mean == pytest.approx(mean, rel=1e-9, abs=1e-12), (row.figure.key, row.level, row.group, name)
            checked += 1
    assert asked > 100 and checked > 300, (asked, checked)


def test_missing_data_is_said_not_zero(report: Report) -> None:
    """Prefix caching is off before the remedy: vLLM exports no hit ratio, and the report says so."""
    row = next(r for r in report.rows if r.level == "cluster" and r.figure.key == "prefix_cache_hit_ratio")
    assert row.values["baseline"].mean is None and row.values["baseline"].samples == 0
    assert row.values["after"].mean is not None and row.values["after"].mean > 0
    markdown, _ = render_markdown(report, None)
    line = next(line for line in markdown.splitlines() if line.startswith("| Prefix-cache hit ratio"))
    assert "no data (0)" in line and "0.0%" not in line.split("|")[2]


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
    done = _cli(backfilled, "--selector", '{model="no-such-model"}')
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "matches no llm_engine_up series" in done.stderr, done.stderr
