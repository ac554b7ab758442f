"""The generated dashboards: structure, hygiene, lines from the configuration, runbook links, and a
PromQL lint over every panel and every rule."""

from __future__ import annotations

import json
import re
import runpy
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.cli import main
from exporter.generate import monitoring_config
from exporter.monitoring.alert_builder import AlertingRule
from exporter.monitoring.alerts import rule_groups
from exporter.monitoring.config import from_mapping
from exporter.monitoring.dashboards import DASHBOARDS, boards
from exporter.monitoring.dashboards.board import Board, panel_id
from exporter.monitoring.dashboards.render import CONFIGMAP_PATH, README_PATH, dashboard_files, json_path
from exporter.monitoring.lint import counter_names, known_names, lint
from exporter.monitoring.promql import metric_names, template_queries
from exporter.settings import Thresholds
from exporter.stages import ENGINE, of
from exporter.stages.panels import Line, Query, stat, timeseries
from tests.support import REPO

# What `generate` builds from the repository: the defaults with the deployed diagnosis lines and SLOs.
CONFIG = monitoring_config(REPO)
RUNBOOKS = REPO / "docs" / "runbooks"
# Grafana's own variables, never defined by a dashboard.
BUILTIN_VARIABLES = {
    "__all",
    "__interval",
    "__interval_ms",
    "__rate_interval",
    "__range",
    "__range_s",
    "__from",
    "__to",
    "__dashboard",
    "__name",
    "__org",
    "__user",
    "__timeFilter",
    "timeFilter",
    "__url_time_range",
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")
DATA_PANEL_TYPES = {"timeseries", "stat", "heatmap", "table", "state-timeline"}


def _committed(name: str) -> dict[str, Any]:
    return json.loads((REPO / json_path(name)).read_text(encoding="utf-8"))


def _all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _variables_in(value: Any) -> set[str]:
    return {next(g for g in m.groups() if g) for text in _strings(value) for m in _VARIABLE.finditer(text)}


def _every_expression() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target, every variable query and every rule."""
    found = []
    for name in DASHBOARDS:
        dashboard = _committed(name)
        for panel in _all_panels(dashboard):
            for target in panel.get("targets", []):
                found.append((f"{name}: {panel['title']} [{target['refId']}]", target["expr"]))
        for variable in dashboard["templating"]["list"]:
            match = re.fullmatch(r"label_values\((.*), \w+\)", variable["query"] or "")
            if match:
                found.append((f"{name}: variable {variable['name']}", match.group(1)))
    for group in rule_groups(CONFIG):
        for rule in group.rules:
            label = getattr(rule, "alert", None) or rule.record
            found.append((f"rule {label}", rule.expr))
            if isinstance(rule, AlertingRule):
                for text in rule.annotations.values():
                    found += [(f"rule {label} annotation", query) for query in template_queries(text)]
    return found


# ---- generation ---------------------------------------------------------------------------------


def test_committed_dashboard_files_equal_what_the_code_generates():
    for path, text in dashboard_files(CONFIG).items():
        assert (REPO / path).read_text(encoding="utf-8") == text, f"{path} is stale: run generate"


def test_generate_check_names_a_stale_dashboard(tmp_path, capsys):
    assert main(["generate", "--out", str(tmp_path)]) == 0
    target = tmp_path / json_path("engine-detail")
    target.write_text(
        target.read_text(encoding="utf-8").replace('"refresh": "30s"', '"refresh": "5s"'), encoding="utf-8"
    )
    (tmp_path / CONFIGMAP_PATH).unlink()
    capsys.readouterr()
    assert main(["generate", "--check", "--out", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert f"{json_path('engine-detail')}: stale (differs from what the code generates)" in lines
    assert f"{CONFIGMAP_PATH}: missing" in lines


@pytest.mark.parametrize("name", DASHBOARDS)
def test_the_grafanalib_source_file_builds_the_committed_json(name):
    # What grafanalib's generate-dashboard loads: the module's `dashboard`, made JSON through the
    # objects' public to_json_data().
    dashboard = runpy.run_path(str(REPO / "dashboards" / f"{name}.dashboard.py"))["dashboard"]
    generated = json.loads(json.dumps(dashboard.to_json_data(), default=lambda value: value.to_json_data()))
    assert generated == _committed(name)


def test_every_dashboard_source_file_is_registered():
    sources = {p.name.removesuffix(".dashboard.py") for p in (REPO / "dashboards").glob("*.dashboard.py")}
    assert sources == set(DASHBOARDS)


def test_the_configmap_carries_each_dashboard_for_the_grafana_sidecar():
    documents = [d for d in yaml.safe_load_all((REPO / CONFIGMAP_PATH).read_text(encoding="utf-8")) if d]
    data = {}
    for document in documents:
        assert document["kind"] == "ConfigMap" and document["apiVersion"] == "v1"
        assert document["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert document["metadata"]["namespace"] == CONFIG.prometheus_rule.namespace
        # kubectl apply keeps the object in an annotation limited to 256 KiB.
        assert len(json.dumps(document)) < 256 * 1024
        data.update(document["data"])
    assert data == {f"{name}.json": (REPO / json_path(name)).read_text(encoding="utf-8") for name in DASHBOARDS}


# ---- structure ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DASHBOARDS)
def test_panel_ids_are_unique(name):
    ids = [panel["id"] for panel in _all_panels(_committed(name))]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)


def _assert_no_overlap(panels: list[dict[str, Any]]) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["h"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r} at {(x, y)}"
                cells[(x, y)] = panel["title"]


@pytest.mark.parametrize("name", DASHBOARDS)
def test_grid_positions_fit_the_grid_and_do_not_overlap(name):
    """The dashboard as it opens, and each folded row's panels as they unfold below it (Grafana keeps
    a folded row's panels inside the row, at the positions they take once it unfolds)."""
    dashboard = _committed(name)
    _assert_no_overlap(dashboard["panels"])
    for row in dashboard["panels"]:
        if row.get("collapsed"):
            assert row["panels"] and min(p["gridPos"]["y"] for p in row["panels"]) == row["gridPos"]["y"] + 1
            _assert_no_overlap(row["panels"])


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_variable_used_is_defined_and_every_defined_one_used(name):
    dashboard = _committed(name)
    defined = [v["name"] for v in dashboard["templating"]["list"]]
    assert len(defined) == len(set(defined))
    used_by_panels = _variables_in(dashboard["panels"])
    used_by_variables = _variables_in(
        [{k: v[k] for k in ("query", "datasource")} for v in dashboard["templating"]["list"]]
    )
    undefined = (used_by_panels | used_by_variables) - set(defined) - BUILTIN_VARIABLES
    assert not undefined, f"used but not defined: {sorted(undefined)}"
    unused = set(defined) - used_by_panels - used_by_variables
    assert not unused, f"defined but never used: {sorted(unused)}"


@pytest.mark.parametrize("name", DASHBOARDS)
def test_datasource_references_resolve_to_a_prometheus_datasource_variable(name):
    dashboard = _committed(name)
    datasources = {
        v["name"] for v in dashboard["templating"]["list"] if v["type"] == "datasource" and v["query"] == "prometheus"
    }
    references = []
    for panel in _all_panels(dashboard):
        if panel["type"] in DATA_PANEL_TYPES:
            assert panel["targets"], panel["title"]
            references.append(panel["datasource"])
            references += [target["datasource"] for target in panel["targets"]]
    references += [v["datasource"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    for reference in references:
        assert reference["type"] == "prometheus"
        match = re.fullmatch(r"\$\{(\w+)\}", reference["uid"])
        assert match and match.group(1) in datasources, reference


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_data_panel_has_a_unit(name):
    for panel in _all_panels(_committed(name)):
        if panel["type"] in DATA_PANEL_TYPES:
            assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']} has no unit"


@pytest.mark.parametrize("name", DASHBOARDS)
def test_grafanalib_hygiene(name):
    dashboard = _committed(name)
    for panel in _all_panels(dashboard):
        assert panel.get("maxDataPoints") is None, panel["title"]
        for target in panel.get("targets", []):
            assert target["intervalFactor"] == 1, panel["title"]
        if panel["type"] == "stat":
            assert panel["options"]["reduceOptions"]["calcs"] == ["lastNotNull"], panel["title"]
        if panel["type"] == "heatmap":
            assert panel["options"]["calculate"] is False, panel["title"]
        refs = [target["refId"] for target in panel.get("targets", [])]
        assert len(refs) == len(set(refs))


def test_dashboard_uids_are_fixed_and_unique():
    uids = {name: _committed(name)["uid"] for name in DASHBOARDS}
    assert uids == {
        "cluster-overview": "llm-cluster-overview",
        "bottleneck-diagnosis": "llm-bottleneck-diagnosis",
        "engine-detail": "llm-engine-detail",
        "disaggregated": "llm-disaggregated",
        "gpu-node": "llm-gpu-node",
        "network": "llm-network",
        "slo": "llm-slo",
    }


def test_the_dashboards_together_offer_every_variable_the_issue_names():
    names = {v["name"] for name in DASHBOARDS for v in _committed(name)["templating"]["list"]}
    assert names == {"datasource", "cluster", "namespace", "node", "model", "engine", "slice_by", "slice"}
    engine = next(v for v in _committed("engine-detail")["templating"]["list"] if v["name"] == "engine")
    assert not engine["includeAll"] and not engine["multi"]
    # The SLO dashboard filters by slice (issue #44): the values a dimension has, within the engines shown.
    slo = {v["name"]: v for v in _committed("slo")["templating"]["list"]}
    assert 'slice_by=~"$slice_by"' in slo["slice"]["query"] and slo["slice"]["includeAll"]
    panels = [p for p in _committed("slo")["panels"] if p.get("title") == "Attainment per slice"]
    assert panels and all('slice=~"$slice"' in t["expr"] for p in panels for t in p["targets"])


def test_panel_ids_do_not_move_when_a_panel_is_inserted_before_them():
    def ids(board: Board) -> dict[str, int]:
        return {p.key: p.id for p in board.panels()}

    before = Board(CONFIG, "t", "t", "t", ("datasource",))
    before.row("R", timeseries("B", "up", unit="s"), timeseries("C", "up", unit="s"))
    after = Board(CONFIG, "t", "t", "t", ("datasource",))
    after.row("Q", stat("A", "up", unit="s"))
    after.row("R", timeseries("B", "up", unit="s"), timeseries("C", "up", unit="s"))
    assert {k: v for k, v in ids(after).items() if k in ("b", "c")} == ids(before)
    assert ids(before)["b"] == panel_id("b")


# ---- content ------------------------------------------------------------------------------------


def test_the_diagnosis_rows_walk_the_framework_in_order_each_with_its_stage_score():
    board = DASHBOARDS["bottleneck-diagnosis"](CONFIG)
    rows = [title for title, _ in board.rows()]
    words = ["ingress", "queueing", "prefill", "kv transfer", "decode", "kv cache", "network", "host"]
    assert len(rows) == len(words)
    for title, word in zip(rows, words):
        assert word in title.lower(), (title, word)
    scores = {p.row: p.definition for p in board.panels() if p.key.startswith("score-")}
    scored = [scores[row].queries[0].expr.split('stage="')[1].split('"')[0] for row in rows[1:]]
    assert scored == [stage.id for stage in of(ENGINE)]
    assert {p.row for p in board.panels()} >= set(rows)
    timeline = next(p for p in board.panels() if p.key == "primary-bottleneck-per-engine")
    assert (
        timeline.definition.kind == "state-timeline" and "llm_bottleneck_primary" in timeline.definition.queries[0].expr
    )


def test_threshold_lines_are_the_configurations_values():
    for board in boards(CONFIG).values():
        for panel in board.panels():
            for line in panel.definition.lines:
                if line.source.startswith("slos."):  # slos.<name>.objective: one SLO's own value
                    name, key = line.source.removeprefix("slos.").rsplit(".", 1)
                    assert getattr(next(s for s in CONFIG.slos if s.name == name), key) == line.value
                elif line.source:
                    section, key = line.source.split(".")
                    assert getattr(getattr(CONFIG, section), key) == line.value, (panel.key, line)


def test_a_threshold_changed_in_the_configuration_moves_the_line_on_the_graph():
    config = replace(
        from_mapping({"thresholds": {"ttft_p99_seconds": 1.5}}), diagnosis=Thresholds(kv_usage_warning=0.7)
    )
    files = dashboard_files(config)
    diagnosis = json.loads(files[json_path("bottleneck-diagnosis")])
    kv = next(p for p in _all_panels(diagnosis) if p["title"] == "KV cache usage")
    assert 0.7 in [step["value"] for step in kv["fieldConfig"]["defaults"]["thresholds"]["steps"]]
    overview = json.loads(files[json_path("cluster-overview")])
    ttft = next(p for p in _all_panels(overview) if p["title"] == "Time to first token")
    assert [s["value"] for s in ttft["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 1.5]
    assert ttft["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] != "off"


def test_a_selector_or_label_changed_in_the_configuration_reaches_every_query():
    config = from_mapping({"selectors": {"exporter": 'job="llm"'}, "labels": {"node": "node"}})
    for board in boards(config).values():
        for panel in board.panels():
            for query in panel.definition.queries:
                if re.search(r"(?<![\w:])llm_[a-z_]+\{", query.expr):
                    assert 'job="llm"' in query.expr, (panel.key, query.expr)
                assert "instance" not in query.expr, (panel.key, query.expr)


def test_rare_panels_say_what_fills_them():
    rare = [p for b in boards(CONFIG).values() for p in b.panels() if p.definition.rare]
    assert {p.definition.title for p in rare} == {
        "XID errors",
        "Clock throttle reasons",
        "Source errors",
        # the path before the engine has data only where a gateway is configured
        "Score: ingress and client network",
        "Latency before and in the engine (window means)",
        "Gateway 5xx by code",
        "Probe end-to-end p95 by path",
        "Requests queued at the gateway",
        # the node's health findings, and the counters that raise them, are empty on a healthy node
        "Link findings",
        "GPU link findings",
        "Start-up and host findings",
        "Link flaps and symbol errors (10m)",
        "ECN switched off (per priority)",
        "NVLink errors",
        "PFC paused share",
        # start-up figures exist after a start; throttling only under a CPU limit
        "Start-up",
        "CPU throttling",
        # slices exist only where a source labels its requests with a tenant, adapter or priority
        "Attainment per slice",
        "Goodput and queue per slice",
    }
    for name in DASHBOARDS:
        for panel in _all_panels(_committed(name)):
            if panel["title"] in {p.definition.title for p in rare}:
                assert "Empty unless" in panel["description"]


# ---- the PromQL lint ----------------------------------------------------------------------------


@pytest.mark.parametrize("where,expr", _every_expression(), ids=lambda v: v if len(v) < 80 else None)
def test_promql_lint_passes(where, expr):
    assert lint(expr, known_names(CONFIG), counter_names()) == []


def test_lint_covers_every_panel_and_every_rule():
    wheres = [where for where, _ in _every_expression()]
    assert sum(w.startswith("rule ") for w in wheres) >= len([r for g in rule_groups(CONFIG) for r in g.rules])
    targets = sum(len(p.definition.queries) for b in boards(CONFIG).values() for p in b.panels())
    assert sum(" [" in w for w in wheres) == targets > 100


@pytest.mark.parametrize(
    "expr,problem",
    [
        ("histogram_quantile(0.9, rate(vllm:time_to_first_token_seconds_bucket[5m]))", "sum by (le"),
        ("histogram_quantile(0.9, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])))", "does not keep `le`"),
        ("histogram_quantile(0.9, sum by (le) (vllm:time_to_first_token_seconds_bucket))", "must sum `rate("),
        ("rate(llm_engine_requests_running[5m])", "not a counter"),
        ("increase(llm_gpu_power_watts[5m])", "not a counter"),
        ("llm_gpu_memory_used_bytes / llm_gpu_memory_total_bytes", "not guarded"),
        ("sum(rate(vllm:prefix_cache_hits_total[5m])) / sum(rate(vllm:prefix_cache_queries_total[5m]))", "not guarded"),
        ("llm_gpu_memory_used_bytes / 0", "not guarded"),
        ("rate(vllm:num_preemptions[5m])", "unknown metric vllm:num_preemptions"),
        ("vllm:gpu_cache_usage", "unknown metric"),
        ('{__name__="vllm:gpu_cache_usage"}', "unknown metric vllm:gpu_cache_usage"),
        ("histogram_quantile(0.9, sum without (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))", "keep `le`"),
        ("llm_gpu_memory_used_bytes / (llm_gpu_memory_total_bytes > bool 0)", "not guarded"),
        ("llm_gpu_memory_used_bytes / (llm_gpu_memory_total_bytes > -1)", "not guarded"),
        ("sum(rate(llm_gpu_xid_errors_total[5m])", "not valid PromQL"),
    ],
)
def test_lint_catches(expr, problem):
    assert any(problem in line for line in lint(expr, known_names(CONFIG), counter_names())), lint(
        expr, known_names(CONFIG), counter_names()
    )


def test_lint_finds_an_unknown_metric_deep_in_calls_and_operands_and_none_in_strings():
    # Label values, label_replace's strings and a `by` label spell metric names; none is read.
    expr = (
        'sum by (vllm_gpu_cache_usage) (rate(llm_engine_prompt_tokens_total{model="vllm:num_preemptions"}[5m]))\n'
        "/ on (model) group_left ()\n"
        "clamp_min(max by (model) (label_replace(1 - (vllm:not_a_family * 2), "
        '"dst", "llm_gpu_up_but_not", "src", "(.*)")), 1)'
    )
    assert lint(expr, known_names(CONFIG), counter_names()) == ["unknown metric vllm:not_a_family"]
    assert metric_names(expr) == {"llm_engine_prompt_tokens_total", "vllm:not_a_family"}


def test_lint_reads_grafana_interval_variables_and_printf_placeholders():
    panel = 'sum(rate(llm_engine_prompt_tokens_total{model=~"$model"}[$__rate_interval]))'
    evidence = "max(llm_gpu_dram_active_ratio{engine=%q})"
    for expr in (panel, evidence):
        assert lint(expr, known_names(CONFIG), counter_names()) == []


@pytest.mark.parametrize(
    "expr",
    [
        'histogram_quantile(0.9, sum by (le, model) (rate(vllm:time_to_first_token_seconds_bucket{a="b"}[5m])))',
        "histogram_quantile(0.9, sum(rate(vllm:time_to_first_token_seconds_bucket[5m])) by (model, le))",
        "histogram_quantile(0.99, sum by (cluster, model, le) "
        "(model_le:llm_engine_time_to_first_token_seconds_bucket:sum_rate5m))",
        "histogram_quantile(0.9, sum without (model) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
        'llm_gpu_up{gpu="0"} / on (gpu) (llm_gpu_up > -0)',
        "llm_gpu_memory_used_bytes / (llm_gpu_memory_total_bytes > 0)",
        "llm_gpu_memory_used_bytes / on (gpu) group_left () clamp_min(llm_gpu_memory_total_bytes, 1)",
        'llm_gpu_memory_used_bytes{engine="a/b"} / 1024',
    ],
)
def test_lint_accepts(expr):
    assert lint(expr, known_names(CONFIG), counter_names()) == []


# ---- README and runbooks ------------------------------------------------------------------------


def _anchors(text: str) -> set[str]:
    return set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_the_readme_lists_every_panel_of_every_dashboard_with_an_anchor():
    readme = (REPO / README_PATH).read_text(encoding="utf-8")
    anchors = _anchors(readme)
    for board in boards(CONFIG).values():
        assert board.uid in anchors
        for panel in board.panels():
            assert panel.anchor in anchors and f"**{panel.definition.title}**" in readme
        for _, anchor in board.rows():
            assert anchor in anchors


def _runbook_links(path: Path) -> list[tuple[str, str]]:
    return re.findall(r"\[([^\]]+)\]\(\.\./\.\./dashboards/README\.md#([^)]+)\)", path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", sorted(RUNBOOKS.glob("LLM*.md")), ids=lambda p: p.stem)
def test_runbooks_link_the_panels_they_name(path):
    text = path.read_text(encoding="utf-8")
    confirm = text.split("## Confirm", 1)[1].split("\n## ", 1)[0] if "## Confirm" in text else ""
    named = re.findall(
        r"\*(Cluster overview|Bottleneck diagnosis|Engine detail|Disaggregated serving|GPU and node|Network)\*", confirm
    )
    links = _runbook_links(path)
    if named:
        assert links, f"{path.name} names dashboards {named} but links no panel"
    anchors = _anchors((REPO / README_PATH).read_text(encoding="utf-8"))
    for text_, anchor in links:
        assert anchor in anchors, f"{path.name}: [{text_}] points at #{anchor}, which is no panel or row"
    linked_dashboards = {anchor.split("--")[0] for _, anchor in links}
    uids = {
        "Cluster overview": "llm-cluster-overview",
        "Bottleneck diagnosis": "llm-bottleneck-diagnosis",
        "Engine detail": "llm-engine-detail",
        "Disaggregated serving": "llm-disaggregated",
        "GPU and node": "llm-gpu-node",
        "Network": "llm-network",
    }
    assert {uids[n] for n in named} <= linked_dashboards


def test_panel_factories_refuse_a_panel_without_unit_or_query():
    with pytest.raises(ValueError):
        timeseries("no unit", "up", unit="")
    with pytest.raises(ValueError):
        timeseries("no query", unit="s")
    assert timeseries("ok", Query("up"), unit="s", lines=(Line(1),)).lines == (Line(1),)
