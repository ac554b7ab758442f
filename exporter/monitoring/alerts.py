"""Alerting rules: each names the stage or component, carries the values it saw, and links its runbook.

The stages' alerts come from their records (stage_alerts.py); the others are here: the latency
objective and load spread, GPUs, RDMA ports, availability, the SLOs' burn rates and the nodes
compared with their peers. The figures a responder needs are looked up by the annotation
templates when an alert fires (alert_builder.py).
"""

from __future__ import annotations

from exporter.monitoring.alert_builder import GROUP_PREFIX, AlertBuilder, AlertingRule, RuleGroup
from exporter.monitoring.cluster import cluster_records
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.health_alerts import health_alerts
from exporter.monitoring.pd_rules import pd_alerts, pd_recording_rules
from exporter.monitoring.promql import percent, series
from exporter.monitoring.records import RecordingRule, RecordNames, recording_rules
from exporter.monitoring.slo_rules import (
    BUDGET_PERIOD,
    DIMENSION_TEXT,
    FAST_BURN,
    SLOW_BURN,
    SloRecordNames,
    burn_expr,
    describe,
    slo_recording_rules,
)
from exporter.monitoring.stage_alerts import stage_alerts
from exporter.settings import SloTarget
from exporter.stages import ENGINE, PATH
from exporter.stages.record import Fmt

__all__ = ["AlertingRule", "RuleGroup", "alert_rules", "rule_groups"]

PCT, SECONDS, COUNT, RATE = Fmt.PERCENT, Fmt.SECONDS, Fmt.COUNT, Fmt.RATE


def _serving_alerts(b: AlertBuilder) -> list[AlertingRule]:
    t, r = b.config.thresholds, b.records
    cluster_ref = f"{{{{ with $labels.{b.cluster} }}}} of cluster {{{{ . }}}}{{{{ end }}}}"
    ttft_p99 = f'{r.latency_quantile("time_to_first_token")}{{quantile="0.99"}}'
    c = RecordNames(b.config)
    on_cluster = (b.cluster,)
    node_tokens = b.lookup("max(" + c.node_tokens + "{@})", (b.cluster, b.node), COUNT, exporter_series=False)
    mean_tokens = b.lookup("max(" + c.node_tokens_mean + "{@})", on_cluster, COUNT, exporter_series=False)
    spread = b.lookup("max(" + c.node_tokens_spread + "{@})", on_cluster, PCT, exporter_series=False)
    coldest = b.lookup("min(" + c.node_tokens + "{@})", on_cluster, COUNT, exporter_series=False)
    total_running = b.lookup("sum(" + r.running + "{@})", (b.cluster, "model"), COUNT, exporter_series=False)
    return [
        b.alert(
            "LLMTimeToFirstTokenP99High",
            f"{ttft_p99} > {t.ttft_p99_seconds:g}",
            "LLM time to first token is above its objective.",
            f"P99 time to first token of model {{{{ $labels.model }}}}{cluster_ref} is "
            f"{{{{ $value | {SECONDS} }}}} across its replicas, above the {t.ttft_p99_seconds:g}s objective.",
        ),
        b.alert(
            "LLMLoadImbalance",
            f"{c.node_load_ratio} > {1 + t.load_imbalance_hot_node_excess:g}\n"
            f"and on ({b.cluster})\n{c.node_tokens_spread} > {t.load_imbalance_spread:g}\n"
            f"unless on ({b.cluster})\n{r.cluster_gpu_busy} < {t.load_imbalance_min_gpu_busy:g}",
            "LLM load is unevenly spread across nodes: this node is hot.",
            f"Node {{{{ $labels.{b.node} }}}}{cluster_ref} generates {node_tokens} tokens/s, "
            f"{{{{ $value | {PCT} }}}} of the per-node mean ({mean_tokens}); the spread across the nodes is "
            f"{spread} (line {percent(t.load_imbalance_spread)}), the coldest node at {coldest} tokens/s. "
            "Rebalance the router's weights or let it route by load.",
            scope="nodes",
        ),
        b.alert(
            "LLMLoadImbalance",
            f"{r.running_cv} > {t.load_imbalance_cv:g}\nand on ({b.cluster}, model)\n"
            f"{r.running} >= {t.load_imbalance_min_running:g}",
            "LLM load is unevenly spread across a model's replicas.",
            f"Running requests of model {{{{ $labels.model }}}}{cluster_ref}"
            "{{ with $labels.role }} in its {{ . }} pool{{ end }} vary across its replicas with a "
            f"coefficient of variation of {{{{ $value | {PCT} }}}} (line {percent(t.load_imbalance_cv)}); "
            f"{total_running} running in total.",
            scope="replicas",
        ),
    ]


def _gpu_alerts(b: AlertBuilder) -> list[AlertingRule]:
    t, win = b.config.thresholds, b.config.windows
    gpu = (
        f"GPU {{{{ $labels.gpu }}}} ({{{{ $labels.gpu_model }}}}, {{{{ $labels.uuid }}}}) on {{{{ $labels.{b.node} }}}}"
        "{{ with $labels.engine }}, used by engine {{ . }}{{ end }}"
    )
    xid = b.s("llm_gpu_xid_errors_total")
    return [
        b.alert(
            "LLMGPUMemoryNearlyFull",
            f"{b.s('llm_gpu_memory_used_bytes')}\n/\n({b.s('llm_gpu_memory_total_bytes')} > 0)\n"
            f"> {t.gpu_memory_used_ratio:g}",
            "GPU memory (HBM) is nearly full.",
            f"{gpu} has {{{{ $value | {PCT} }}}} of its HBM in use (line {percent(t.gpu_memory_used_ratio)}).",
        ),
        b.alert(
            "LLMGPUXidErrors",
            # A series born with its first XID has no earlier sample for increase(): count it too.
            f"increase({xid}[{win.xid_errors}]) > 0\nor\n"
            f"(max_over_time({xid}[{win.xid_errors}]) unless {xid} offset {win.xid_errors}) > 0",
            "A GPU reported XID errors.",
            f"{gpu} reported XID {{{{ $labels.xid }}}} {{{{ $value | {COUNT} }}}} time(s) "
            f"in the last {win.xid_errors}.",
        ),
        b.alert(
            "LLMGPUDown",
            f"{b.s('llm_gpu_up')} == 0",
            "A GPU stopped answering.",
            f"{gpu} does not answer the exporter's queries (llm_gpu_up 0): lost, fallen off the bus or in reset.",
        ),
    ]


def _rdma_alerts(b: AlertBuilder) -> list[AlertingRule]:
    t, win, w = b.config.thresholds, b.config.windows, b.config.rate_interval
    port = f"RDMA port {{{{ $labels.device }}}}/{{{{ $labels.port }}}} on {{{{ $labels.{b.node} }}}}"
    up = b.s("llm_rdma_port_up")
    return [
        b.alert(
            "LLMRDMAPortDown",
            f"{up} == 0\nand\nmax_over_time({up}[{win.rdma_port_down_lookback}]) == 1",
            "An RDMA port went down.",
            f"{port} is not ACTIVE; it was within the last {win.rdma_port_down_lookback}.",
        ),
        b.alert(
            "LLMRDMAPortErrors",
            f"rate({b.s('llm_rdma_port_errors_total')}[{w}]) > {t.rdma_port_errors_per_second:g}",
            "An RDMA port counts errors.",
            f"{port} counts {{{{ $value | {RATE} }}}} {{{{ $labels.kind }}}} errors/s "
            f"(line {t.rdma_port_errors_per_second:g}/s).",
        ),
    ]


def _availability_alerts(b: AlertBuilder) -> list[AlertingRule]:
    up = series("up", b.x)
    not_engine = 'source!="engine"'
    return [
        b.alert(
            "LLMEngineDown",
            f"{b.s('llm_engine_up')} == 0",
            "An LLM inference engine is not answering its metrics endpoint.",
            f"The exporter on {{{{ $labels.{b.node} }}}} cannot scrape engine {{{{ $labels.engine }}}} "
            "({{ $labels.engine_type }}, model {{ $labels.model }}): it is down, restarting or unreachable.",
        ),
        b.alert(
            "LLMExporterSourceDown",
            # Engine sources are covered, with their model, by LLMEngineDown.
            f"{b.s('llm_exporter_source_up', not_engine)} == 0",
            "An exporter source fails to collect.",
            f"The {{{{ $labels.source }}}} source ({{{{ $labels.target }}}}) of the exporter on "
            f"{{{{ $labels.{b.node} }}}} fails its collections: its families are missing from that node.",
        ),
        b.alert(
            "LLMExporterAbsent",
            f"{up} == 0\nor\nabsent({up})",
            "The LLM bottleneck exporter is not being scraped.",
            f"{{{{ with $labels.{b.node} }}}}The exporter at {{{{ . }}}} is down{{{{ else }}}}No exporter target "
            f"matching {b.x or 'the exporter selector'} is scraped{{{{ end }}}}: "
            "bottleneck diagnosis and the alerts built on it are blind there.",
        ),
    ]


def _cluster_alerts(b: AlertBuilder) -> list[AlertingRule]:
    """Nodes compared with their peers: the straggler and the congested link, each named."""
    t, w, c = b.config.thresholds, b.config.rate_interval, RecordNames(b.config)
    node_labels = (b.cluster, b.node)
    cluster_ref = f"{{{{ with $labels.{b.cluster} }}}} of cluster {{{{ . }}}}{{{{ end }}}}"

    def of_node(template: str, fmt: str) -> str:
        return b.lookup(template, node_labels, fmt)

    def of_cluster(template: str, fmt: str) -> str:
        return b.lookup(template, (b.cluster,), fmt, exporter_series=False)

    itl = b.lookup("max(" + c.node_itl + "{@})", node_labels, SECONDS, exporter_series=False)
    median_itl = of_cluster("quantile(0.5, " + c.node_itl + "{@})", SECONDS)
    clock = of_node("avg(llm_gpu_sm_clock_hertz{@}) / 1e6", COUNT)
    fleet_clock = b.lookup("avg(llm_gpu_sm_clock_hertz{@}) / 1e6", (b.cluster,), COUNT)
    temperature = of_node("max(llm_gpu_temperature_celsius{@})", COUNT)
    running = of_node("sum(llm_engine_requests_running{@})", COUNT)
    load = b.lookup("max(" + c.node_load_ratio + "{@})", node_labels, PCT, exporter_series=False)
    rdma = of_node("max(llm_rdma_port_transmit_utilization_ratio{@})", PCT)
    port_labels = (b.cluster, b.node, "device", "port")
    port_wait = b.lookup("sum(rate(llm_rdma_port_transmit_wait_total{@}[" + w + "]))", port_labels, COUNT)
    port_cnp = b.lookup("sum(rate(llm_rdma_port_cnp_handled_total{@}[" + w + "]))", port_labels, RATE)
    peers = b.lookup("quantile(0.5, llm_rdma_port_transmit_utilization_ratio{@})", node_labels, PCT)
    port = f"RDMA port {{{{ $labels.device }}}}/{{{{ $labels.port }}}} on {{{{ $labels.{b.node} }}}}{cluster_ref}"
    utilization = series("llm_rdma_port_transmit_utilization_ratio", b.x)
    return [
        b.alert(
            "LLMStragglerNode",
            f"{c.node_itl_ratio} > {t.straggler_itl_ratio:g}",
            "One node generates tokens markedly slower than its peers: a straggler.",
            f"Node {{{{ $labels.{b.node} }}}}{cluster_ref}: median inter-token latency {itl}, "
            f"{{{{ $value | {RATE} }}}}x the median node's {median_itl} (line {t.straggler_itl_ratio:g}x). "
            f"Evidence: SM clock {clock} MHz against {fleet_clock} MHz across the cluster, "
            f"hottest GPU {temperature} C, "
            f"{running} requests running, {load} of the per-node mean load, RDMA transmit up to {rdma}. "
            "Same load, slower tokens: check throttling (clocks, temperature), the NICs and noisy neighbours.",
        ),
        b.alert(
            "LLMRDMALinkCongested",
            f"{utilization}\nand on ({b.cluster}, {b.node}, device, port)\n{c.port_congested} == 1\n"
            f"and on ({b.cluster}, {b.node})\n"
            f"quantile by ({b.cluster}, {b.node}) (0.5, {utilization}) < {t.rdma_link_congested_utilization:g}",
            "One RDMA link is congested while its peers are not.",
            f"{port} transmits at {{{{ $value | {PCT} }}}} of its rate and stalls "
            f"({port_wait} xmit_wait ticks/s, {port_cnp} CNPs handled/s) while the node's median port runs at "
            f"{peers}. A tensor-parallel all-reduce moves at its slowest link: move the other traffic off this rail "
            "or check the switch port and cable.",
        ),
    ]


def alert_rules(config: MonitoringConfig) -> list[AlertingRule]:
    return [rule for group in rule_groups(config) for rule in group.rules if isinstance(rule, AlertingRule)]


def rule_groups(config: MonitoringConfig) -> list[RuleGroup]:
    b = AlertBuilder(config)
    return [
        RuleGroup(f"{GROUP_PREFIX}.records", list(recording_rules(config))),
        stage_alerts(b, ENGINE),
        RuleGroup(f"{GROUP_PREFIX}.serving", list(_serving_alerts(b))),
        RuleGroup(f"{GROUP_PREFIX}.gpu", list(_gpu_alerts(b))),
        RuleGroup(f"{GROUP_PREFIX}.rdma", list(_rdma_alerts(b))),
        RuleGroup(f"{GROUP_PREFIX}.availability", list(_availability_alerts(b))),
        health_alerts(b),
        RuleGroup(f"{GROUP_PREFIX}.disaggregated", [*pd_recording_rules(config), *pd_alerts(b)]),
        stage_alerts(b, PATH),
        # One group, records first: rules of a group run in order, so an alert reads the burn
        # recorded in the same evaluation (groups run concurrently, a second group could lag one).
        RuleGroup(
            f"{GROUP_PREFIX}.slo",
            [*slo_recording_rules(config), *(rule for slo in config.slos for rule in _slo_alerts(b, slo))],
        ),
        RuleGroup(f"{GROUP_PREFIX}.cluster-records", list(cluster_records(config))),
        RuleGroup(f"{GROUP_PREFIX}.cluster", list(_cluster_alerts(b))),
    ]


def _slo_alerts(b: AlertBuilder, slo: SloTarget) -> list[RecordingRule | AlertingRule]:
    """Page on fast burn, ticket on slow burn (exporter/monitoring/slo_rules.py), per dimension."""
    budget = 1 - slo.objective
    rules: list[RecordingRule | AlertingRule] = []
    labels = (b.cluster, "slo", "dimension")
    attained = b.lookup(f"1 - {SloRecordNames.error_ratio('1h')}{{@}}", labels, PCT, exporter_series=False)
    where = "{{ $labels.measured_at }}"
    for dimension, threshold in slo.thresholds():
        what = f"{DIMENSION_TEXT[dimension]} ≤ {threshold:g}s for {percent(slo.objective)} of requests"
        for name, conditions, speed in (
            ("LLMSLOErrorBudgetBurnFast", FAST_BURN, "fast"),
            ("LLMSLOErrorBudgetBurnSlow", SLOW_BURN, "slowly"),
        ):
            rules.append(
                b.alert(
                    name,
                    burn_expr(slo, dimension, conditions),
                    f"SLO {slo.name} burns its error budget {speed}.",
                    f"SLO {slo.name} ({what}) burns its {percent(budget)} error budget "
                    f"{{{{ $value | {RATE} }}}}× as fast as the {BUDGET_PERIOD} period allows "
                    f"(line {describe(conditions)}); {attained} within over the last hour. Measured at the {where}, "
                    "the point nearest the client that measures it (probe, gateway, engine).",
                    slo=slo.name,
                    dimension=dimension,
                )
            )
    return rules
