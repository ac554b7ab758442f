"""The pieces every alert is built from: the rule types, the selectors and label names of the
monitoring configuration, and the evidence lookups an annotation runs when the alert fires."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import escape_printf, evidence, label_matchers, series
from exporter.monitoring.records import RecordingRule, RecordNames

GROUP_PREFIX = "llm-bottleneck-exporter"


@dataclass(frozen=True)
class AlertingRule:
    alert: str
    expr: str
    for_: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]

    def as_dict(self) -> dict[str, object]:
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
        }


@dataclass(frozen=True)
class RuleGroup:
    name: str
    rules: list[RecordingRule | AlertingRule] = field(default_factory=list)


def _q(value: str) -> str:
    return '"' + value + '"'


class AlertBuilder:
    """Shared pieces of every alert: selectors, label names and the evidence lookups."""

    def __init__(self, config: MonitoringConfig) -> None:
        self.config = config
        self.x = config.selectors.exporter
        self.cluster = config.labels.cluster
        self.node = config.labels.node
        self.records = RecordNames(config)
        self.engine_labels = (self.cluster, self.node, "engine")
        self.model_labels = (self.cluster, self.node, "engine", "model")

    def alert(self, name: str, expr: str, summary: str, description: str, **labels: str) -> AlertingRule:
        policy = self.config.policy(name)
        return AlertingRule(
            alert=name,
            expr=expr,
            for_=policy.for_,
            labels={"severity": policy.severity, **labels},
            annotations={
                "summary": summary,
                "description": description,
                "runbook_url": self.config.runbook_url(name),
            },
        )

    def s(self, name: str, *matchers: str) -> str:
        return series(name, self.x, *matchers)

    def lookup(self, template: str, labels: tuple[str, ...], fmt: str, exporter_series: bool = True) -> str:
        """An evidence snippet; `@` in `template` stands for the matchers: the exporter selector
        (unless the series is recorded, which drops `job`) and one `label=%q` per label."""
        own = escape_printf(self.x) if exporter_series else ""
        matchers = ", ".join(m for m in (own, label_matchers(labels)) if m)
        return evidence(template.replace("@", matchers), labels, fmt)

    def of_engine(self, template: str, fmt: str) -> str:
        """A figure of this engine's own series (labels engine and model)."""
        return self.lookup(template, self.model_labels, fmt)

    def of_gpus(self, template: str, fmt: str) -> str:
        """A figure of the GPUs attributed to this engine (label engine, no model)."""
        return self.lookup(template, self.engine_labels, fmt)

    def of_node(self, template: str, fmt: str) -> str:
        return self.lookup(template, (self.cluster, self.node), fmt)

    def last_profile(self) -> str:
        """The trace of the engine's last automatic profile (llm_engine_profile_info), where it has
        one: a page names the trace taken while a stage held. Nothing where it has none."""
        matchers = ", ".join(m for m in (escape_printf(self.x), label_matchers(self.engine_labels)) if m)
        args = " ".join(f"$labels.{name}" for name in self.engine_labels)
        stage, trace = (f'{{{{ . | first | label "{name}" }}}}' for name in ("stage", "trace"))
        return (
            f"{{{{ with printf `llm_engine_profile_info{{{matchers}}}` {args} | query }}}}"
            f" Last profile, taken while {stage} held: {trace} (its summary in /diagnosis).{{{{ end }}}}"
        )

    def engine_ident(self) -> str:
        return (
            f"Engine {{{{ $labels.engine }}}} ({{{{ $labels.engine_type }}}}, model {{{{ $labels.model }}}}) "
            f"on {{{{ $labels.{self.node} }}}}"
        )

    def stage_active(self, stage: str) -> str:
        return f"{self.s('llm_bottleneck_active', f'stage={_q(stage)}')} == 1"

    def stage_score(self, stage: str) -> str:
        """The score, while the stage is active (hysteresis decided by the exporter)."""
        return f"{self.s('llm_bottleneck_score', f'stage={_q(stage)}')}\nand\n{self.stage_active(stage)}"
