"""SLOs: per configured SLO, attainment against its objective at each measuring point,
error-budget burn against the paging lines, goodput, the capacity headroom left before the SLO
breaks, the replicas and the concurrency it allows; and what a request costs.

One row per SLO of the exporter's `slos:` (the same list the burn-rate alerts are generated
from). Attainment is the lower bound at the threshold's bucket edge (docs/slo.md), measured at the
engine, the gateway and the prober; headroom is an estimate with its confidence, the answer to
"GPU utilization is low: can we add load?"; replicas, concurrency and cost are docs/capacity.md's.
"""

from __future__ import annotations

from typing import Any

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, summary
from exporter.monitoring.dashboards.queries import Scope
from exporter.monitoring.promql import percent
from exporter.monitoring.slo_rules import FAST_BURN, SLOW_BURN, SloRecordNames
from exporter.settings import SloTarget
from exporter.stages.panels import Line, PanelDef, Query, Unit, text, timeseries

UID = "llm-slo"
TITLE = "LLM serving / SLOs"
VARIABLES = ("datasource", "cluster", "model", "engine", "slice_by", "slice")
AT_CAPACITY, NOW = 'load="slo_capacity"', 'load="current"'
#: costs are in the currency of capacity.gpu_hour_price, whatever it is
COST = "none"


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    if not config.slos:
        b.top(
            text(
                "No SLOs configured",
                "Add `slos:` to the exporter configuration (docs/configuration.md#latency-slos) and "
                "regenerate: each SLO gets a row here and its burn-rate alerts.",
                width=24,
                height=4,
            )
        )
    for slo in config.slos:
        b.row(_title(slo), *_panels(s, slo), *_decisions(s, slo), key=f"slo-{slo.name}")
    b.row("Cost", *_cost(s), key="cost")
    return b


def _decisions(s: Scope, slo: SloTarget) -> tuple[PanelDef, ...]:
    """Replicas and concurrency the SLO allows (exporter/slo/replicas.py, concurrency.py)."""
    name = f'slo="{slo.name}"'

    def per_engine(op: str, family: str, *matchers: str) -> str:
        return f"{op} by ({s.cluster}, engine) ({s(family, *matchers)})"

    def counts(key: str, title: str, description: str, *queries: Query) -> PanelDef:
        return timeseries(title, *queries, unit=Unit.COUNT, min=0, key=f"{slo.name}-{key}", description=description)

    return (
        counts(
            "replicas",
            "Replicas to reach the SLO",
            "Replicas the model's demand needs to stay within the SLO at capacity.target_utilization of each "
            "replica's capacity (slo_model:llm_capacity_desired_replicas:ceil; a fall waits for "
            "capacity.scale_down_stabilization_seconds), beside the replicas up now. KEDA or the HPA read it "
            "(deploy/autoscaling/).",
            Query(s.record(SloRecordNames.model_desired_replicas, name), "{{model}} {{role}} desired"),
            Query(f"count by ({s.cluster}, model) ({s('llm_engine_up')} == 1)", "{{model}} now"),
        ),
        counts(
            "concurrency",
            "Concurrency the SLO allows vs running",
            "The largest running batch whose predicted latency keeps the SLO at today's mix: what max_num_seqs "
            "should be near (an action in /diagnosis when it is far), beside the configured value and the batch "
            "running now.",
            Query(per_engine("min", "llm_capacity_recommended_concurrency", name), "{{engine}} max"),
            Query(per_engine("max", "llm_capacity_configured_concurrency"), "{{engine}} max_num_seqs"),
            Query(per_engine("sum", "llm_engine_requests_running"), "{{engine}} running"),
        ),
    )


def _cost(s: Scope) -> tuple[PanelDef, ...]:
    """GPU cost per request and per million tokens (exporter/slo/cost.py), where prices are set."""
    by_model = f"by ({s.cluster}, model)"
    requests = f"sum {by_model} ({s.rate('llm_engine_e2e_request_latency_seconds_count')})"
    hourly = f"sum {by_model} ({s('llm_cost_per_hour')})"
    return (
        timeseries(
            "Cost per request",
            Query(f"{hourly} / 3600\n/\n({requests} > 0)", "{{model}} now"),
            Query(f"min {by_model} ({s('llm_cost_per_request', AT_CAPACITY)})", "{{model}} at SLO capacity"),
            unit=COST,
            min=0,
            key="cost-request",
            width=12,
            description="GPU cost of one request across the model's replicas (capacity.gpu_hour_price), now and at "
            "the largest rate its SLOs allow at the same mix (the cheapest a request gets without breaking them).",
        ),
        timeseries(
            "Cost per million tokens",
            Query(
                f"avg by ({s.cluster}, model, tokens) ({s('llm_cost_per_million_tokens', NOW)})",
                "{{model}} {{tokens}} now",
            ),
            Query(
                f"min by ({s.cluster}, model, tokens) ({s('llm_cost_per_million_tokens', AT_CAPACITY)})",
                "{{model}} {{tokens}} at SLO capacity",
            ),
            unit=COST,
            min=0,
            key="cost-tokens",
            width=12,
            description="Prompt and generated tokens priced separately: the GPU time split by how long requests "
            "spend in prefill and in decode (docs/capacity.md).",
        ),
    )


def _title(slo: SloTarget) -> str:
    parts = [f"{d} ≤ {t:g}s" for d, t in slo.thresholds()]
    return f"SLO {slo.name}: {', '.join(parts)} for {percent(slo.objective)}"


def _panels(s: Scope, slo: SloTarget) -> tuple[PanelDef, ...]:
    name = f'slo="{slo.name}"'
    cluster = f'{s.cluster}=~"$cluster"'
    model = 'model=~"$model"'
    objective = (Line(slo.objective, "green", f"slos.{slo.name}.objective"),)
    burn_lines = tuple(Line(c.factor, "red" if c.factor > 5 else "orange") for c in FAST_BURN + SLOW_BURN[:1])
    requests = f"sum by ({s.cluster}, engine) ({s.rate('llm_engine_e2e_request_latency_seconds_count')})"

    def panel(key: str, title: str, *queries: Query, **options: Any) -> PanelDef:
        """One of this SLO's panels; its key is the SLO's."""
        return timeseries(title, *queries, key=f"{slo.name}-{key}", **options)

    def per_engine(op: str, family: str, legend: str = "{{engine}}", by: str = "engine") -> Query:
        return Query(f"{op} by ({s.cluster}, {by}) ({s(family, name)})", legend)

    def recorded(record: str, legend: str, *matchers: str) -> Query:
        return Query(f"{record}{{{', '.join((name, cluster, *matchers))}}}", legend)

    return (
        panel(
            "points",
            "Attainment where it is measured",
            Query(
                f"1 - {SloRecordNames.point_error_ratio(s.w)}{{{', '.join((name, cluster))}}}",
                "{{measured_at}} {{dimension}}",
            ),
            unit=Unit.RATIO,
            max=1,
            lines=objective,
            description="The same SLO judged at the engine (its own clock), the gateway (every request through "
            "it) and the prober (its requests through the gateway). The engine's clock starts after the API "
            "server has parsed the request: a gap below the engine's line is time spent before it "
            "(/diagnosis slo.client_engine_gap says where). The burn-rate alerts read the point nearest the client.",
        ),
        panel(
            "attainment",
            "Attainment per model",
            recorded(SloRecordNames.model_attainment(s.w), "{{model}} {{dimension}}", model),
            unit=Unit.RATIO,
            max=1,
            lines=objective,
            description="Fraction of events within the threshold across the model's replicas (lower bound at the "
            "bucket edge; per token gap for itl). Below the line, the SLO is missed over this window.",
        ),
        panel(
            "burn",
            "Error-budget burn rate",
            *(recorded(SloRecordNames.burn_rate(w), f"{{{{dimension}}}} over {w}") for w in ("1h", "6h", "3d")),
            unit=Unit.SCORE,
            min=0,
            lines=burn_lines,
            description="Error ratio over the error budget (1 - objective): 1 spends the budget exactly in 30 days. "
            "LLMSLOErrorBudgetBurnFast pages at 14.4 over 1h (and 5m) or 6 over 6h (and 30m).",
        ),
        panel(
            "goodput",
            "Goodput per engine",
            per_engine("sum", "llm_slo_goodput_requests_per_second", "{{engine}} {{dimension}}", "engine, dimension"),
            Query(requests, "{{engine}} all requests"),
            unit=Unit.REQUESTS_PER_SECOND,
            min=0,
            description="Requests per second within the threshold, beside all completed requests.",
        ),
        panel(
            "slice-attainment",
            "Attainment per slice",
            per_engine(
                "min",
                "llm_slo_slice_attainment_ratio",
                "{{measured_at}} {{slice_by}}={{slice}} {{dimension}}",
                "measured_at, slice_by, slice, dimension",
            ),
            unit=Unit.RATIO,
            max=1,
            lines=objective,
            description="Per tenant, LoRA adapter and priority class where the sources label requests with one "
            "(docs/metrics.md, Slices), per measuring point (the engines' lowest, the gateways' lowest); filter "
            'with the Slice variables. slice="other" holds the values past max_slices_per_dimension.',
            rare="an engine or gateway labels its requests with a tenant, adapter or priority class",
        ),
        panel(
            "slice-goodput",
            "Goodput and queue per slice",
            per_engine(
                "sum",
                "llm_slo_slice_goodput_requests_per_second",
                "{{measured_at}} {{slice_by}}={{slice}} {{dimension}} goodput",
                "measured_at, slice_by, slice, dimension",
            ),
            Query(
                f"sum by ({s.cluster}, slice_by, slice) ({s('llm_engine_slice_requests_waiting')})",
                "{{slice_by}}={{slice}} waiting",
            ),
            unit=Unit.REQUESTS_PER_SECOND,
            min=0,
            description="Requests per second within the threshold per slice, beside the requests each slice has "
            "waiting where the engine reports its queue per slice (SGLang's priority classes).",
            rare="an engine or gateway labels its requests with a tenant, adapter or priority class",
        ),
        panel(
            "capacity",
            "Capacity under the SLO vs load",
            per_engine("max", "llm_capacity_max_request_rate", "{{engine}} max"),
            Query(requests, "{{engine}} now"),
            unit=Unit.REQUESTS_PER_SECOND,
            min=0,
            description="The estimated largest request rate at which the engine still meets the SLO at today's "
            "request mix (exporter/slo/headroom.py), beside the rate it serves.",
        ),
        panel(
            "headroom",
            "Headroom",
            per_engine("min", "llm_capacity_headroom_ratio"),
            recorded(SloRecordNames.model_headroom, "model {{model}} {{role}}", model),
            unit=Unit.RATIO,
            max=1,
            lines=(Line(0.0, "red"),),
            description="1 - load / capacity under the SLO, per engine and per model across replicas (per pool of "
            "a disaggregated model). Low GPU utilization with little headroom means added concurrency would break "
            "the SLO.",
        ),
        panel(
            "confidence",
            "Capacity estimate confidence",
            per_engine("min", "llm_capacity_estimate_confidence_ratio"),
            unit=Unit.RATIO,
            min=0,
            max=1,
            description="0.3 on the model's prior alone; higher as the engine's own load history spans more of the "
            "range the estimate extrapolates over.",
        ),
    )
