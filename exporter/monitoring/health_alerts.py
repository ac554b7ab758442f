"""The node's health findings as alerts: one rule per finding alert (exporter/health/alerts.py),
firing on `llm_health_finding` of the kinds it covers while the exporter holds the finding. The
finding's own `for:` is the alert's; the figure is the series' value."""

from __future__ import annotations

from exporter.health.evaluate import NodeHealth  # noqa: F401 - registers every finding kind
from exporter.health.record import alerts, kinds_of
from exporter.monitoring.alert_builder import GROUP_PREFIX, AlertBuilder, RuleGroup


def health_alerts(b: AlertBuilder) -> RuleGroup:
    rules = []
    where = f"Node {{{{ $labels.{b.node} }}}}: "
    for alert in alerts():
        covered = "|".join(kinds_of(alert))
        rules.append(
            b.alert(
                alert.name, b.s("llm_health_finding", f'kind=~"{covered}"'), alert.summary, where + alert.description
            )
        )
    return RuleGroup(f"{GROUP_PREFIX}.health", list(rules))
