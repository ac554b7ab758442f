"""What a newcomer meets on the generated dashboards (issue #42): links between the dashboards, from
a stage's panels to its runbook and to /diagnosis, the inter-token latency's lines from the model's
own baseline and the SLO, and an ingress row that says why it is empty on a node without a gateway."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.generate import monitoring_config
from exporter.monitoring.config import MonitoringConfig, from_mapping
from exporter.monitoring.dashboards import DASHBOARDS, bottleneck_diagnosis
from exporter.monitoring.dashboards.render import dashboard_json, json_path
from exporter.monitoring.records import RecordNames
from exporter.stages import stages
from tests.support import REPO

CONFIG = monitoring_config(REPO)
RUNBOOKS = REPO / "docs" / "runbooks"


def committed(name: str) -> dict[str, Any]:
    return json.loads((REPO / json_path(name)).read_text(encoding="utf-8"))


def runbook_file(url: str) -> Path:
    """The file a runbook URL names, under docs/runbooks/ (the URL is the configured base + name)."""
    base = CONFIG.runbook_url_base.rstrip("/")
    assert url.startswith(base + "/"), url
    return RUNBOOKS / url.removeprefix(base + "/")


def rows(dashboard: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Row title -> its panels, folded rows' included."""
    found: dict[str, list[dict[str, Any]]] = {}
    current: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            current = found.setdefault(panel["title"], list(panel.get("panels", [])))
        else:
            current.append(panel)
    return found


@pytest.mark.parametrize("name", DASHBOARDS)
def test_every_dashboard_links_the_others_and_the_runbooks(name: str) -> None:
    links = committed(name)["links"]
    (others,) = [link for link in links if link["type"] == "dashboards"]
    assert others["tags"] == ["llm-bottleneck-exporter"] and others["includeVars"] and others["keepTime"]
    for other in DASHBOARDS:
        assert "llm-bottleneck-exporter" in committed(other)["tags"], f"{other} would be missing from the list"
    (runbooks,) = [link for link in links if link["type"] == "link"]
    assert runbook_file(runbooks["url"]).name == "README.md" and runbook_file(runbooks["url"]).is_file()


def test_every_panel_of_a_stage_row_links_to_the_runbooks_of_its_alerts() -> None:
    by_row = rows(committed("bottleneck-diagnosis"))
    covered: set[str] = set()
    for number, stage in enumerate((s for s in stages() if s.row is not None), start=1):
        (title,) = [t for t in by_row if t.startswith(f"{number} · {stage.row.title}")]
        for panel in by_row[title]:
            urls = {link["url"] for link in panel["links"]}
            for alert in stage.alerts:
                assert CONFIG.runbook_url(alert.name) in urls, (panel["title"], alert.name)
            for url in urls:
                assert runbook_file(url).is_file(), url
                covered.add(runbook_file(url).stem)
    # Every stage's alert is reached from some row (a stage without a row is covered by its scope's).
    assert {alert.name for stage in stages() for alert in stage.alerts} <= covered


def test_scores_and_the_primary_stage_link_each_series_to_diagnosis_and_engine_detail() -> None:
    dashboard = committed("bottleneck-diagnosis")
    panels = [p for row in rows(dashboard).values() for p in row] + dashboard["panels"]
    linked = [p for p in panels if p.get("fieldConfig", {}).get("defaults", {}).get("links")]
    titles = {p["title"] for p in linked}
    assert "Primary bottleneck per engine" in titles
    assert {f"Score: {s.title}" for s in stages() if s.row is not None and s.row.score_width} <= titles
    for panel in linked:
        diagnosis, detail = panel["fieldConfig"]["defaults"]["links"]
        assert diagnosis["url"] == "http://${__field.labels.instance}/diagnosis", panel["title"]
        assert detail["url"].startswith("/d/llm-engine-detail?var-engine=${__field.labels.engine}&")
    # The link follows the configuration: the node label, or a URL of its own.
    relabelled = replace(CONFIG, labels=replace(CONFIG.labels, node="node"))
    assert relabelled.diagnosis_link() == "http://${__field.labels.node}/diagnosis"
    own = from_mapping({"diagnosis_url": "https://proxy.example/${__field.labels.node}/diagnosis"})
    assert own.diagnosis_link() == "https://proxy.example/${__field.labels.node}/diagnosis"


def itl_panels() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for name in DASHBOARDS:
        dashboard = committed(name)
        for panel in [p for row in rows(dashboard).values() for p in row] + dashboard["panels"]:
            if panel["title"] in ("Inter-token latency", "Inter-token latency p95"):
                found.append((name, panel))
    return found


def test_inter_token_latency_is_drawn_against_the_models_own_baseline_and_the_slo() -> None:
    """The seed case moves 24 → 48 ms: a fixed 0.2 s line says nothing there. The line is the
    diagnosis' own: itl_slowdown_ratio times the model's best p95 over baseline_seconds, recorded."""
    records = RecordNames(CONFIG)
    panels = itl_panels()
    assert {name for name, _ in panels} == {"bottleneck-diagnosis", "engine-detail", "cluster-overview"}
    slowdown = f"{CONFIG.diagnosis.itl_slowdown_ratio:g} * {records.itl_best}"
    for name, panel in panels:
        steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        assert [s["value"] for s in steps] == [None], f"{name}: {panel['title']} keeps a fixed line: {steps}"
        exprs = [t["expr"] for t in panel["targets"]]
        assert any(e.startswith(slowdown) for e in exprs), (name, exprs)
        assert any("llm_slo_threshold_seconds" in e and 'dimension="itl"' in e for e in exprs), (name, exprs)
        dashed = [o["matcher"]["options"] for o in panel["fieldConfig"]["overrides"]]
        legends = [t["legendFormat"] for t in panel["targets"] if t["legendFormat"].endswith(" line")]
        assert len(legends) == 2 and len(dashed) == 2, (name, legends, dashed)
    rules = yaml.safe_load((REPO / "alerts" / "generated" / "llm-bottleneck.rules.yaml").read_text())
    recorded = {rule.get("record") for group in rules["groups"] for rule in group["rules"]}
    assert records.itl_best in recorded and records.itl_best.endswith("p95_min10m")


def test_the_ingress_row_is_folded_and_explained_without_a_gateway() -> None:
    def ingress(config: MonitoringConfig) -> dict[str, Any]:
        built = json.loads(dashboard_json(bottleneck_diagnosis.board(config)))
        (row,) = [p for p in built["panels"] if p["type"] == "row" and "Ingress" in p["title"]]
        return row

    folded = ingress(MonitoringConfig())
    assert folded["collapsed"] and folded["title"] == "1 · Ingress / client network (no gateway configured)"
    guide = folded["panels"][0]
    assert guide["type"] == "text" and "No gateway is configured" in guide["options"]["content"]
    assert "`gateways:`" in guide["options"]["content"]
    assert any(p["title"].startswith("Gateway 5xx") for p in folded["panels"]), "its panels are one click away"
    opened = ingress(replace(MonitoringConfig(), gateways=("edge",)))
    assert not opened["collapsed"] and opened["title"] == "1 · Ingress / client network"
    # The committed dashboard follows the deployed exporter configuration, which has no gateway.
    assert CONFIG.gateways == ()
    assert any(title.endswith("(no gateway configured)") for title in rows(committed("bottleneck-diagnosis")))


def test_generate_reads_the_gateways_from_the_exporter_configuration(tmp_path: Path) -> None:
    exporter_config = tmp_path / "exporter.yaml"
    exporter_config.write_text(
        yaml.safe_dump(
            {
                "engines": [{"name": "e0", "type": "vllm", "url": "http://127.0.0.1:8000/metrics"}],
                "gateways": [{"name": "edge", "type": "haproxy", "url": "http://127.0.0.1:8404/metrics"}],
            }
        )
    )
    config = monitoring_config(tmp_path, exporter_config=str(exporter_config))
    assert config.gateways == ("edge",)
    assert not any(p.row.endswith("(no gateway configured)") for p in bottleneck_diagnosis.board(config).panels())


def test_the_disaggregated_board_links_the_runbooks_of_the_pair_alerts() -> None:
    """The pools, the TTFT parts and the hand-over each link the runbooks of the alerts that page on
    them, and every linked alert is one the generated rules define."""
    rules = yaml.safe_load((REPO / "alerts" / "generated" / "llm-bottleneck.rules.yaml").read_text())
    alerting = {rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule}
    by_title = {p["title"]: p for row in rows(committed("disaggregated")).values() for p in row}
    linked = {title: {runbook_file(link["url"]).stem for link in p["links"]} for title, p in by_title.items()}
    assert linked["Waiting per worker"] == {"LLMPrefillDecodeImbalance"}
    assert linked["Transfer share of TTFT"] == {"LLMKVTransferBound"}
    assert linked["Failed and expired hand-overs"] == {"LLMKVTransferFailures", "LLMKVTransferExpired"}
    reached = set().union(*linked.values())
    assert reached == {
        "LLMPrefillDecodeImbalance",
        "LLMKVTransferBound",
        "LLMKVTransferFailures",
        "LLMKVTransferExpired",
    }
    assert reached <= alerting
    assert all((RUNBOOKS / f"{alert}.md").is_file() for alert in reached)
