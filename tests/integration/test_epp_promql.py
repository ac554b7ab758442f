"""The endpoint picker's counts as the exporter reads them, against the same PromQL evaluated by the
real promtool on the raw series of the capture (tests/epp_captures.py builds them from the EPP's
code at their real size: the request families come ~95 KB into the body)."""

from __future__ import annotations

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.model import Sample
from exporter.settings import GatewayTarget
from exporter.sources.base import collect_now
from exporter.sources.gateway import GatewaySource
from exporter.sources.gateways.common import status_key
from exporter.sources.gateways.epp import ERROR_STATUS
from tests.integration.monitoring_stack import run_tool
from tests.support import FIXTURES, RouteServer, respond_with

pytestmark = pytest.mark.integration

CAPTURES = {
    "epp-llm-d-router-full.txt": ("llm_d_epp_request_total", "llm_d_epp_request_error_total"),
    "epp-inference-extension-full.txt": (
        "inference_objective_request_total",
        "inference_objective_request_error_total",
    ),
}


def exporter_counts(text: str) -> dict[tuple[str, str], float]:
    server = RouteServer({"/metrics": respond_with(text)})
    try:
        source = GatewaySource(GatewayTarget(url=server.url("/metrics"), name="epp", type="epp"), window_seconds=60)
        metrics = collect_now(source, 0.0)
        source.close()
    finally:
        server.close()
    assert Sample("llm_gateway_up", {"gateway": "epp", "gateway_type": "epp"}, 1.0) in metrics
    return {
        (m.labels["code_class"], m.labels["code"]): m.value
        for m in metrics
        if isinstance(m, Sample) and m.name == "llm_gateway_requests_total"
    }


def series_line(name: str, labels: dict[str, str]) -> str:
    pairs = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return f"{name}{{{pairs}}}"


@pytest.mark.parametrize("capture", sorted(CAPTURES))
def test_the_epp_counts_equal_promql_on_the_raw_series(capture: str, tmp_path) -> None:
    text = (FIXTURES / "gateways" / capture).read_text()
    requests, errors = CAPTURES[capture]
    counts = exporter_counts(text)
    raw = [
        {"series": series_line(sample.name, sample.labels), "values": f"{sample.value:g}"}
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in (requests, errors)
    ]
    assert raw
    tests = []
    for (code_class, code), value in sorted(counts.items()):
        if code_class == "2xx":
            expr = f"sum({requests}) - sum({errors})"
        else:
            epp_codes = sorted(c for c, status in ERROR_STATUS.items() if status_key(status) == (code_class, code))
            expr = f'sum({errors}{{error_code=~"{"|".join(epp_codes)}"}})'
        tests.append({"expr": expr, "eval_time": "0m", "exp_samples": [{"labels": "{}", "value": value}]})
    tests.append(
        {
            "expr": f"sum({requests})",
            "eval_time": "0m",
            "exp_samples": [{"labels": "{}", "value": sum(counts.values())}],
        }
    )
    rules = tmp_path / "epp.yaml"
    rules.write_text(
        yaml.safe_dump({"tests": [{"interval": "1m", "input_series": raw, "promql_expr_test": tests}]}, sort_keys=False)
    )
    result = run_tool("promtool", "test", "rules", str(rules), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
