"""A gateway's histograms per slice: the EPP's objectives and target models (the llm-d router's
capture), LiteLLM's teams (a page shaped as its 1.108 capture, with team aliases set), and SLO
attainment per slice at the gateway, against the buckets summed by the same label."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.app import Exporter, Pipeline
from exporter.model import QuantileSummary, Sample
from exporter.settings import Config, GatewayTarget, GpuSettings, ScrapeLimits, SloTarget
from exporter.sources.gateway import GatewaySource
from tests.support import FIXTURES, UNHURRIED, UNHURRIED_SECONDS, RouteServer, respond_with

EPP = (FIXTURES / "gateways" / "epp-llm-d-router.txt").read_text()
LITELLM = (FIXTURES / "gateways" / "litellm-1.108.txt").read_text()
#: the EPP's objective as the tenant, its target model as the adapter (docs/configuration.md)
EPP_SLICES = ScrapeLimits(
    slice_labels=(("tenant", ("model_name",)), ("adapter", ("target_model_name",))), timeout_seconds=UNHURRIED_SECONDS
)
E2E_1S = SloTarget("e2e-1s", 0.9, e2e_seconds=1.0)


def within_by(text: str, family: str, label: str, edge: str) -> dict[str, float]:
    """Per value of `label`: the share of the histogram's observations at or below `edge`."""
    within: dict[str, float] = {}
    total: dict[str, float] = {}
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            value = sample.labels.get(label)
            if sample.name == family + "_bucket" and float(sample.labels.get("le", "nan")) == float(edge):
                within[value] = within.get(value, 0.0) + sample.value
            elif sample.name == family + "_count":
                total[value] = total.get(value, 0.0) + sample.value
    return {value: within[value] / total[value] for value in total}


@pytest.fixture
def page() -> Iterator[RouteServer]:
    server = RouteServer()
    yield server
    server.close()


def once(page: RouteServer, text: str, kind: str, limits: ScrapeLimits) -> Exporter:
    page.routes["/metrics"] = respond_with(text)
    target = GatewayTarget(url=page.url("/metrics"), name="gw", type=kind, limits=limits)
    config = Config(gpu=GpuSettings("none"), slos=(E2E_1S,))
    exporter = Exporter(config, clock=lambda: 0.0, pipeline=Pipeline([GatewaySource(target, 60.0, True)], []))
    exporter.collect_once()
    return exporter


def slice_values(exporter: Exporter, name: str, dimension: str) -> dict[str, float]:
    assert exporter.latest is not None
    return {
        m.labels["slice"]: m.value
        for m in exporter.latest.metrics
        if m.name == name and isinstance(m, Sample) and m.labels.get("slice_by") == dimension
    }


def test_epp_objectives_and_target_models_are_slices_judged_on_their_own_buckets(page: RouteServer) -> None:
    exporter = once(page, EPP, "epp", EPP_SLICES)
    try:
        for dimension, label in (("tenant", "model_name"), ("adapter", "target_model_name")):
            expected = within_by(EPP, "llm_d_epp_request_duration_seconds", label, "1.0")
            assert slice_values(exporter, "llm_slo_slice_attainment_ratio", dimension) == pytest.approx(expected)
        folded = [m for m in exporter.latest.metrics if m.name == "llm_gateway_slices_folded"]  # type: ignore[union-attr]
        assert {m.labels["slice_by"]: m.value for m in folded} == {"tenant": 0.0, "adapter": 0.0}
        # Without slice_labels of its own the EPP's priority label slices it too (the default).
        assert slice_values(exporter, "llm_slo_slice_attainment_ratio", "priority") == {}
    finally:
        exporter.stop()


def test_slices_add_up_to_the_gateway_histogram(page: RouteServer) -> None:
    exporter = once(page, EPP, "epp", EPP_SLICES)
    try:
        (summary,) = [
            m
            for m in exporter.latest.metrics  # type: ignore[union-attr]
            if isinstance(m, QuantileSummary) and m.name == "llm_gateway_request_duration_seconds"
        ]
    finally:
        exporter.stop()
    tenants = [h.lifetime for (dimension, _), h in summary.slices if dimension == "tenant"]
    assert sum(h.count for h in tenants) == summary.count
    assert [sum(c) for c in zip(*(h.cumulative for h in tenants))][-1] == summary.count


def test_litellm_teams_are_tenants_and_unset_aliases_name_none(page: RouteServer) -> None:
    # The capture's requests carry team_alias="None" (no team): no slice. Give two of its series
    # a team each, as a proxy with teams set would label them.
    teams = LITELLM.replace('team_alias="None"', 'team_alias="search"', 40)
    exporter = once(page, teams, "litellm", UNHURRIED)
    try:
        found = slice_values(exporter, "llm_slo_slice_attainment_ratio", "tenant")
    finally:
        exporter.stop()
    expected = within_by(teams, "litellm_request_total_latency_metric", "team_alias", "1.0")
    assert set(found) == {"search"}
    assert found["search"] == pytest.approx(expected["search"])


def test_the_epp_priority_is_a_slice_by_default(page: RouteServer) -> None:
    exporter = once(page, EPP, "epp", UNHURRIED)
    try:
        found = slice_values(exporter, "llm_slo_slice_attainment_ratio", "priority")
    finally:
        exporter.stop()
    assert found == pytest.approx(within_by(EPP, "llm_d_epp_request_duration_seconds", "priority", "1.0"))
