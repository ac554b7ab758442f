"""The PromQL of every matrix figure, at three levels: cluster-wide, per model, per engine.

Figures that a recording rule defines are that rule's own expression (`recording_rules`), built
for the report's selector and rate window and evaluated inline, so the report needs no recorded
series and means what the dashboards mean. The rules group `by (cluster, model)`; the engine level
builds the same rules with the grouping widened by `engine`, and the cluster level aggregates the
model level once more. Figures no rule defines (GPU, RDMA, host, prefix cache) are built here from
the catalogue's family names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from exporter.catalogue import CATALOGUE, LATENCY_FAMILIES
from exporter.monitoring.config import LabelNames, MonitoringConfig, Selectors
from exporter.monitoring.promql import series
from exporter.monitoring.records import RecordNames, engine_histogram_names, recording_rules
from exporter.report.timing import Reads
from exporter.stages import stages
from exporter.stages.record import Measure

Level = Literal["cluster", "model", "engine"]
LEVELS: tuple[Level, ...] = ("cluster", "model", "engine")
Better = Literal["higher", "lower", ""]
Load = Literal["up", "down", ""]


@dataclass(frozen=True)
class QueryContext:
    """What every expression is built from: the selector (matchers without braces), the rate window
    and the label names of the monitoring configuration."""

    selector: str
    rate_interval: str
    labels: LabelNames
    #: matchers of the engines' own series (their histograms), "" for any job
    engine_selector: str = ""

    def rules(self, level: Level) -> dict[tuple[str, str], str]:
        """(record, quantile label or "") -> expression, grouped for `level` (model or engine)."""
        labels = self.labels
        if level == "engine":
            labels = replace(labels, cluster=f"{labels.cluster}, engine")
        config = MonitoringConfig(
            selectors=Selectors(exporter=self.selector, engines=self.engine_selector),
            labels=labels,
            rate_interval=self.rate_interval,
        )
        rules = recording_rules(config)
        plain = {r.record: r.expr for r in rules if not r.labels}
        return {(r.record, r.labels.get("quantile", "")): _inline(r.expr, plain) for r in rules}

    @property
    def names(self) -> RecordNames:
        return RecordNames(MonitoringConfig(rate_interval=self.rate_interval))

    def grouping(self, level: Level) -> str:
        c = self.labels.cluster
        return {"cluster": c, "model": f"{c}, model", "engine": f"{c}, engine, model"}[level]

    def sel(self, name: str) -> str:
        return series(name, self.selector)


def _inline(expr: str, records: dict[str, str]) -> str:
    """`expr` with every recorded series it reads replaced by that rule's expression, so it
    evaluates on the raw series alone (a Prometheus without the rules loaded, or before them)."""
    for _ in range(4):  # rules read rules at most two deep
        replaced = _RECORD_NAME.sub(lambda m: f"({records[m.group(0)]})" if m.group(0) in records else m.group(0), expr)
        if replaced == expr:
            return expr
        expr = replaced
    return expr


_RECORD_NAME = re.compile(r"(?<![\w:])[a-zA-Z_]+:[a-zA-Z0-9_:]+(?![\w:])")

Builder = Callable[[QueryContext, Level], "str | None"]


@dataclass(frozen=True)
class Figure:
    """One row kind of the matrix."""

    key: str
    label: str
    unit: str  # "req/s", "tok/s", "tokens", "s", "ratio", "GiB", "cores", "/s", "requests"
    #: which way is good news ("lower" latency, "higher" throughput); "" where neither is (the
    #: request mix, utilization): the pages colour a change by it
    better: Better
    build: Builder
    #: how a value looks back in time (timing.py), which decides where in a window it is read
    reads: Reads = "instant"
    #: a figure of the request mix: the way it asks more of the engines ("up": longer prompts,
    #: more requests; "down": less prefix sharing). Only a change that way can cause a bottleneck.
    load: Load = ""


def _rule(record: Callable[[RecordNames], str], cluster_op: str, quantile: str = "") -> Builder:
    def build(ctx: QueryContext, level: Level) -> str:
        if level == "cluster":
            return f"{cluster_op} by ({ctx.labels.cluster}) ({ctx.rules('model')[(record(ctx.names), quantile)]})"
        return ctx.rules(level)[(record(ctx.names), quantile)]

    return build


def _per_request(tokens: Callable[[RecordNames], str]) -> Builder:
    """Mean tokens per request: a token rate over the request rate of the same rules."""

    def build(ctx: QueryContext, level: Level) -> str:
        numerator = _rule(tokens, "sum")(ctx, level)
        denominator = _rule(lambda n: n.requests_rate, "sum")(ctx, level)
        return f"({numerator})\n/\n(({denominator}) > 0)"

    return build


def _engine_gauge(name: str, op: str) -> Builder:
    def build(ctx: QueryContext, level: Level) -> str:
        return f"{op} by ({ctx.grouping(level)}) ({ctx.sel(name)})"

    return build


def _gpu(name: str, op: str, scale: str = "") -> Builder:
    """A GPU family per engine/model through the `engine` label of attributed GPUs, joined to the
    engine's `model` (GPU series carry no model); cluster-wide over every GPU.

    The join's right side is one series per (node, engine): the most recently reported of its
    `llm_engine_up` series. Two can be in the lookback at once (an engine first seen down exports
    `model=""`, then its model; data backfilled or federated has no staleness markers to end the
    first), and a plain `group by (..., model)` then makes Prometheus refuse the whole query
    (HTTP 422, duplicate series for the match group). An engine serving several models puts its
    GPUs under one of them.
    """

    def build(ctx: QueryContext, level: Level) -> str:
        node = ctx.labels.node
        if level == "cluster":
            return f"{op} by ({ctx.labels.cluster}) ({ctx.sel(name)}){scale}"
        latest = f"topk by ({node}, engine) (1, timestamp({ctx.sel('llm_engine_up')}))"
        models = f"group by ({node}, engine, model) ({latest})"
        joined = f"{ctx.sel(name)} * on ({node}, engine) group_left (model) {models}"
        return f"{op} by ({ctx.grouping(level)}) ({joined}){scale}"

    return build


def _cluster_only(expr: Callable[[QueryContext], str]) -> Builder:
    def build(ctx: QueryContext, level: Level) -> str | None:
        return expr(ctx) if level == "cluster" else None

    return build


def _engine_cpu(ctx: QueryContext, level: Level) -> str | None:
    if level == "cluster":
        return f"avg by ({ctx.labels.cluster}) ({ctx.sel('llm_host_cpu_overall_utilization_ratio')})"
    rate = f"rate({ctx.sel('llm_engine_process_cpu_seconds_total')}[{ctx.rate_interval}])"
    return f"sum by ({ctx.grouping(level)}) ({rate})"


def _rate_sum(*names: str) -> Callable[[QueryContext], str]:
    def expr(ctx: QueryContext) -> str:
        parts = [f"sum by ({ctx.labels.cluster}) (rate({ctx.sel(n)}[{ctx.rate_interval}]))" for n in names]
        return "\n+ ".join(parts)

    return expr


def _slo_attainment(ctx: QueryContext, level: Level) -> str:
    """The worst SLO dimension's attainment over the rate window. Cluster-wide at the measuring point
    nearest the client that measures it (probe, gateway, engine), as the burn-rate alerts read
    it; per model and engine the engines' own (a gateway's series name no model)."""
    by = f"{ctx.grouping(level)}, slo, dimension"

    def ratio(point: str) -> str:
        matcher = f'measured_at="{point}"'
        good = (
            f"sum by ({by}) (rate({series('llm_slo_good_events_total', ctx.selector, matcher)}[{ctx.rate_interval}]))"
        )
        events = f"sum by ({by}) (rate({series('llm_slo_events_total', ctx.selector, matcher)}[{ctx.rate_interval}]))"
        return f"({good}\n/\n({events} > 0))"

    points = ("probe", "gateway", "engine") if level == "cluster" else ("engine",)
    return f"min by ({ctx.grouping(level)}) (\n" + f"\nor on ({by})\n".join(ratio(p) for p in points) + "\n)"


def _cost_per_request(ctx: QueryContext, level: Level) -> str:
    """GPU cost per second over completed requests per second (exporter/slo/cost.py)."""
    by = ctx.grouping(level)
    requests = f"sum by ({by}) (rate({ctx.sel('llm_engine_e2e_request_latency_seconds_count')}[{ctx.rate_interval}]))"
    return f"sum by ({by}) ({ctx.sel('llm_cost_per_hour')}) / 3600\n/\n({requests} > 0)"


def _latency(key: str, quantile: float, label: str) -> Figure:
    short = {
        "time_to_first_token": "ttft",
        "inter_token_latency": "itl",
        "e2e_request_latency": "e2e",
        "queue_time": "queue",
    }
    return Figure(
        f"{short[key]}_p{round(quantile * 100)}",
        f"{label} P{round(quantile * 100)}",
        "s",
        "lower",
        _rule(lambda n: n.latency_quantile(key), "max", str(quantile)),
        reads="quantile",
    )


FIGURES: tuple[Figure, ...] = (
    Figure("request_rate", "Request rate", "req/s", "higher", _rule(lambda n: n.requests_rate, "sum"), "rate", "up"),
    Figure("prompt_tokens_rate", "Prompt tokens/s", "tok/s", "", _rule(lambda n: n.prompt_tokens_rate, "sum"), "rate"),
    Figure(
        "generation_tokens_rate",
        "Generation tokens/s",
        "tok/s",
        "higher",
        _rule(lambda n: n.generation_tokens_rate, "sum"),
        "rate",
    ),
    Figure(
        "mean_prompt_tokens",
        "Mean prompt tokens / request",
        "tokens",
        "",
        _per_request(lambda n: n.prompt_tokens_rate),
        reads="rate",
        load="up",
    ),
    Figure(
        "mean_output_tokens",
        "Mean output tokens / request",
        "tokens",
        "",
        _per_request(lambda n: n.generation_tokens_rate),
        reads="rate",
        load="up",
    ),
    *(
        _latency(key, q, label)
        for key, label in (
            ("time_to_first_token", "TTFT"),
            ("inter_token_latency", "ITL"),
            ("e2e_request_latency", "E2E"),
        )
        for q in (0.5, 0.95, 0.99)
    ),
    _latency("queue_time", 0.99, "Queue time"),
    Figure("running", "Running requests", "requests", "", _rule(lambda n: n.running, "sum")),
    Figure("waiting", "Waiting requests", "requests", "lower", _rule(lambda n: n.waiting, "sum")),
    Figure("kv_usage_max", "KV-cache usage (max)", "ratio", "lower", _rule(lambda n: n.kv_usage_max, "max")),
    Figure("preemptions_rate", "Preemptions/s", "/s", "lower", _rule(lambda n: n.preemptions_rate, "sum"), "rate"),
    Figure(
        "prefix_cache_hit_ratio",
        "Prefix-cache hit ratio",
        "ratio",
        "",
        _engine_gauge("llm_engine_prefix_cache_hit_ratio", "avg"),
        reads="windowed",  # hits over queries in the exporter's window
        load="down",
    ),
    Figure("gpu_utilization", "GPU utilization", "ratio", "", _gpu("llm_gpu_utilization_ratio", "avg")),
    Figure("sm_active", "SM active", "ratio", "", _gpu("llm_gpu_sm_active_ratio", "avg")),
    Figure("dram_active", "DRAM active", "ratio", "", _gpu("llm_gpu_dram_active_ratio", "avg")),
    Figure("tensor_active", "Tensor active", "ratio", "", _gpu("llm_gpu_tensor_active_ratio", "avg")),
    Figure("hbm_used", "HBM used", "GiB", "", _gpu("llm_gpu_memory_used_bytes", "sum", " / 2^30")),
    Figure(
        "rdma_utilization",
        "RDMA transmit utilization (max port)",
        "ratio",
        "",
        _cluster_only(
            lambda ctx: f"max by ({ctx.labels.cluster}) ({ctx.sel('llm_rdma_port_transmit_utilization_ratio')})"
        ),
    ),
    Figure(
        "rdma_congestion",
        "RDMA congestion (CNP + ECN marks)/s",
        "/s",
        "lower",
        _cluster_only(_rate_sum("llm_rdma_port_cnp_handled_total", "llm_rdma_port_ecn_marked_packets_total")),
        reads="rate",
    ),
    # The host's utilization over the exporter's window (cluster), the engines' CPU rate (others).
    Figure("cpu", "Host CPU (cluster: utilization; engine: cores)", "cpu", "", _engine_cpu, reads="windowed"),
    # The exporter's estimate over its window (exporter/slo/concurrency.py).
    Figure(
        "recommended_concurrency",
        "Concurrency the SLOs allow (recommended max_num_seqs)",
        "requests",
        "",
        _engine_gauge("llm_capacity_recommended_concurrency", "min"),
        reads="windowed",
    ),
    Figure("slo_attainment", "SLA attainment (worst SLO dimension)", "ratio", "higher", _slo_attainment, reads="rate"),
    Figure("cost_per_request", "GPU cost per request", "/req", "lower", _cost_per_request, reads="rate"),
)
FIGURES_BY_KEY = {f.key: f for f in FIGURES}


def _measure(measure: Measure) -> Figure:
    """A figure a stage brings (its record's `measures`): its family per engine, model and cluster."""
    if measure.family not in CATALOGUE:
        raise ValueError(f"measure {measure.key}: {measure.family} is not in the catalogue")

    def build(ctx: QueryContext, level: Level) -> str:
        selected = series(measure.family, ", ".join(m for m in (ctx.selector, measure.match) if m))
        if measure.rate:
            selected = f"rate({selected}[{ctx.rate_interval}])"
        return f"{measure.aggregate} by ({ctx.grouping(level)}) ({selected})"

    reads: Reads = "rate" if measure.rate else "instant"
    return Figure(measure.key, measure.label, measure.unit, measure.better, build, reads)


def all_figures() -> tuple[Figure, ...]:
    """The matrix's rows: the figures above, then those the registered stages bring."""
    return FIGURES + tuple(_measure(m) for stage in stages() for m in stage.measures)


# Every family a figure reads is one the exporter exports (the catalogue is the contract).
assert all(name in CATALOGUE for name in LATENCY_FAMILIES.values())


def histograms_expr(engine_selector: str, seconds: float) -> str:
    """Engine latency-histogram bucket series present in the last `seconds` before the query time
    (the recording rules' first source of the latency quantiles)."""
    names = sorted({f"{name}_bucket" for key in LATENCY_FAMILIES for name in engine_histogram_names(key)})
    matchers = ", ".join(m for m in (f'__name__=~"{"|".join(names)}"', engine_selector) if m)
    return f"count(last_over_time({{{matchers}}}[{max(1, round(seconds))}s]))"
