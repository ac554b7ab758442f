"""The generated rules and the local stack configs pass the real promtool and amtool, and the
promtool unit tests of every alert pass — and catch a broken rule."""

from __future__ import annotations

import shutil

import pytest
import yaml

from exporter.monitoring.rule_files import PROMETHEUS_RULE_PATH, RULES_PATH
from tests.integration.monitoring_stack import LOCAL, run_tool
from tests.support import REPO

pytestmark = pytest.mark.integration
TESTS_DIR = REPO / "alerts" / "tests"


def _test_files() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in TESTS_DIR.glob("*.yaml"))


def test_promtool_check_rules_accepts_the_generated_rule_file():
    result = run_tool("promtool", "check", "rules", RULES_PATH)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_rules_accepts_the_prometheus_rule_manifest_spec(tmp_path):
    manifest = yaml.safe_load((REPO / PROMETHEUS_RULE_PATH).read_text(encoding="utf-8"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(manifest["spec"], sort_keys=False), encoding="utf-8")
    result = run_tool("promtool", "check", "rules", str(spec))
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_its_promtool_unit_tests():
    assert len(_test_files()) >= 17


@pytest.mark.parametrize("test_file", _test_files())
def test_promtool_unit_tests_of_every_alert_pass(test_file):
    """One promtool run per file: each is bounded on its own (the whole set took 72 s on a quiet
    two-core machine and past pytest's 300 s with a second test run beside it), and a failure
    names its file."""
    result = run_tool("promtool", "test", "rules", test_file, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == 1


def test_promtool_unit_tests_fail_when_a_threshold_is_broken(tmp_path):
    # Copy the tests and the rules, loosen the KV line in the rules: the near miss at 0.79 must fire.
    (tmp_path / "generated").mkdir()
    (tmp_path / "tests").mkdir()
    rules = (REPO / RULES_PATH).read_text(encoding="utf-8")
    broken = rules.replace(
        'llm_engine_kv_cache_usage_ratio{job="llm-bottleneck-exporter"} >= 0.8',
        'llm_engine_kv_cache_usage_ratio{job="llm-bottleneck-exporter"} >= 0.7',
    )
    assert broken != rules
    (tmp_path / "generated" / "llm-bottleneck.rules.yaml").write_text(broken, encoding="utf-8")
    shutil.copy(TESTS_DIR / "LLMKVCacheSaturated.test.yaml", tmp_path / "tests")
    result = run_tool("promtool", "test", "rules", "tests/LLMKVCacheSaturated.test.yaml", cwd=tmp_path)
    assert result.returncode != 0
    assert "stage active but KV just under its line" in result.stdout + result.stderr


def test_amtool_accepts_the_local_alertmanager_config():
    result = run_tool("amtool", "check-config", str(LOCAL / "alertmanager.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 inhibit rules" in result.stdout


@pytest.mark.parametrize(("severity", "receiver"), [("critical", "pager"), ("warning", "ticket"), ("info", "null")])
def test_alertmanager_routes_each_severity_to_its_receiver(severity, receiver):
    result = run_tool(
        "amtool",
        "config",
        "routes",
        "test",
        f"--config.file={LOCAL / 'alertmanager.yml'}",
        f"severity={severity}",
        "alertname=LLMKVCacheSaturated",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def test_promtool_accepts_the_local_prometheus_config_and_its_rule_files():
    result = run_tool("promtool", "check", "config", str(LOCAL / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "llm-bottleneck.rules.yaml" in result.stdout


def test_burn_rate_tests_fail_when_the_page_ignores_its_long_window(tmp_path):
    # Drop the 1h condition of the fast burn: the 10-minute blip's 5m burn alone must then page.
    (tmp_path / "generated").mkdir()
    (tmp_path / "tests").mkdir()
    rules = (REPO / RULES_PATH).read_text(encoding="utf-8")
    long_window = 'slo:llm_slo_error_budget_burn_rate:ratio_rate1h{slo="ttft", dimension="ttft"} > 14.4\n      and\n'
    assert long_window in rules
    (tmp_path / "generated" / "llm-bottleneck.rules.yaml").write_text(rules.replace(long_window, ""), encoding="utf-8")
    shutil.copy(TESTS_DIR / "LLMSLOErrorBudgetBurnFast.test.yaml", tmp_path / "tests")
    result = run_tool("promtool", "test", "rules", "tests/LLMSLOErrorBudgetBurnFast.test.yaml", cwd=tmp_path)
    assert result.returncode != 0
    assert "a 10-minute blip of slow requests does not page" in result.stdout + result.stderr
