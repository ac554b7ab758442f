"""The stages' alerts, from their records (exporter/stages/): one rule group per scope.

The engine stages' alerts key on the exporter's `llm_bottleneck_active{stage}` — the diagnosis
decided from several signals together, with hysteresis — and, where one engine-level family is the
defining evidence (KV usage, waiting requests), require that family past its line too, so the
page's value is that figure. The other figures a responder needs (DRAM and SM activity of the
engine's GPUs, latency quantiles, preemption rate) are looked up by the annotation templates when
it fires, and so is the trace of the engine's last automatic profile (docs/health.md) where one
exists. Within a group the pages come first, then the request path's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.monitoring.alert_builder import GROUP_PREFIX, AlertBuilder, AlertingRule, RuleGroup
from exporter.monitoring.config import SEVERITIES
from exporter.monitoring.promql import percent
from exporter.monitoring.records import RecordingRule
from exporter.stages import ENGINE, of
from exporter.stages.record import EngineFigure, Fmt, Scope, Stage

# Where each figure a responder needs is looked up: the engine's own series, the GPUs attributed
# to it, or its node; `[w]` is the rate window.
FIGURE_LOOKUPS: Mapping[EngineFigure, tuple[str, str, str]] = {
    "running": ("engine", "sum(llm_engine_requests_running{@})", Fmt.COUNT),
    "waiting": ("engine", "sum(llm_engine_requests_waiting{@})", Fmt.COUNT),
    "kv": ("engine", "max(llm_engine_kv_cache_usage_ratio{@})", Fmt.PERCENT),
    "itl_p95": ("engine", 'max(llm_engine_inter_token_latency_seconds{@, quantile="0.95"})', Fmt.SECONDS),
    "ttft_p95": ("engine", 'max(llm_engine_time_to_first_token_seconds{@, quantile="0.95"})', Fmt.SECONDS),
    "queue_p95": ("engine", 'max(llm_engine_queue_time_seconds{@, quantile="0.95"})', Fmt.SECONDS),
    "preemptions": ("engine", "sum(rate(llm_engine_preemptions_total{@}[w]))", Fmt.RATE),
    "prompt_rate": ("engine", "sum(rate(llm_engine_prompt_tokens_total{@}[w]))", Fmt.COUNT),
    "engine_cpu": ("engine", "sum(rate(llm_engine_process_cpu_seconds_total{@}[w]))", Fmt.RATE),
    "dram": ("gpus", "max(llm_gpu_dram_active_ratio{@})", Fmt.PERCENT),
    "sm": ("gpus", "avg(llm_gpu_sm_active_ratio{@})", Fmt.PERCENT),
    "tensor": ("gpus", "max(llm_gpu_tensor_active_ratio{@})", Fmt.PERCENT),
    "gpu_util": ("gpus", "avg(llm_gpu_utilization_ratio{@})", Fmt.PERCENT),
    "rdma_util": ("node", "max(llm_rdma_port_transmit_utilization_ratio{@})", Fmt.PERCENT),
    "cnp": ("node", "sum(rate(llm_rdma_port_cnp_handled_total{@}[w]))", Fmt.RATE),
    "retrans": ("node", "sum(rate(llm_rdma_port_retransmissions_total{@}[w]))", Fmt.RATE),
}


class StageAlertContext:
    """`AlertContext` (exporter/stages/record.py) for one stage, over the monitoring configuration."""

    def __init__(self, b: AlertBuilder, stage: Stage[Any]) -> None:
        self._b = b
        self._stage = stage
        self.diagnosis = b.config.diagnosis
        self.rate_interval = b.config.rate_interval
        self.engine = b.engine_ident()
        self.gateway = (
            f"Gateway {{{{ $labels.gateway }}}} ({{{{ $labels.gateway_type }}}}) on {{{{ $labels.{b.node} }}}}"
        )
        self.by_gateway = f"{b.cluster}, {b.node}, gateway, gateway_type"

    def value(self, fmt: str) -> str:
        return f"{{{{ $value | {fmt} }}}}"

    def series(self, name: str, *matchers: str) -> str:
        return self._b.s(name, *matchers)

    def score_while_active(self) -> str:
        return self._b.stage_score(self._stage.id)

    def past_line(self, family: str, line: float) -> str:
        return f"{self._b.s(family)} >= {line:g}\nand ignoring (stage)\n{self._b.stage_active(self._stage.id)}"

    def score(self) -> str:
        return self._b.of_engine(f'max(llm_bottleneck_score{{@, stage="{self._stage.id}"}})', Fmt.SCORE)

    def figure(self, name: EngineFigure) -> str:
        whose, template, fmt = FIGURE_LOOKUPS[name]
        template = template.replace("[w]", f"[{self.rate_interval}]")
        lookup = {"engine": self._b.of_engine, "gpus": self._b.of_gpus, "node": self._b.of_node}[whose]
        return lookup(template, fmt)

    def of_gateway(self, template: str, fmt: str) -> str:
        return self._b.lookup(template, (self._b.cluster, self._b.node, "gateway"), fmt)

    def percent(self, ratio: float) -> str:
        return percent(ratio)

    def alert_line(self, name: str) -> float:
        return float(getattr(self._b.config.thresholds, name))


def stage_alerts(b: AlertBuilder, scope: Scope[Any]) -> RuleGroup:
    """The alerts of a scope's stages, pages first, then in request-path order."""
    declared = [(stage, alert) for stage in of(scope) for alert in stage.alerts]
    declared.sort(key=lambda pair: SEVERITIES.index(pair[1].severity))
    rules: list[RecordingRule | AlertingRule] = []
    for stage, alert in declared:
        context = StageAlertContext(b, stage)
        expr = alert.expr(context) if alert.expr is not None else context.score_while_active()
        labels = {"stage": stage.id} if scope.stage_label else {}
        description = alert.description(context) + (b.last_profile() if scope is ENGINE else "")
        rules.append(b.alert(alert.name, expr, alert.summary, description, **labels))
    return RuleGroup(f"{GROUP_PREFIX}.{scope.alert_group}", rules)
