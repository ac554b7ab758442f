"""Error-budget burn of each configured SLO: recording rules and multiwindow, multi-burn-rate alerts.

The SRE workbook's alerting on SLOs (chapter 5, "Multiwindow, Multi-Burn-Rate Alerts"), as Sloth
and Pyrra generate it: the error ratio of each SLO dimension is recorded over 5m, 30m, 1h, 2h, 6h,
1d and 3d from the exporter's cumulative `llm_slo_events_total` / `llm_slo_good_events_total`
(the engines' own histogram counts at the threshold's bucket edge); the burn rate is that ratio
over the error budget, 1 − objective.

- page (`LLMSLOErrorBudgetBurnFast`): burn ≥ 14.4 over 1h and 5m (2 % of a 30-day budget in an
  hour), or ≥ 6 over 6h and 30m (5 % in six hours);
- ticket (`LLMSLOErrorBudgetBurnSlow`): burn ≥ 3 over 1d and 2h (10 % in a day), or ≥ 1 over 3d
  and 6h.

The short window makes the alert stop soon after the burn does; the long one keeps a blip from
paging.

Each SLO is measured at every point that can (`measured_at`: engine, gateway, probe;
exporter/slo/points.py). The burn is computed per point and the alerts read the one closest to the
client that exists for that SLO and dimension — probe, then gateway, then engine — so a wait the
engine's clock cannot see (a starved API server, a gateway queue) burns the budget too; the alert
carries `measured_at` and says it.

A disaggregated request is judged once, on the decode worker where it ends (exporter/slo/legs.py):
the exporter exports no SLO events for a prefill worker, and these rules leave out any that an
exporter from before that rule still exports (`role!="prefill"`), so a model's events stay its
requests through a rolling upgrade.

Each SLO's alerts have its name and objective inlined, so `generate --check` fails when the
deployed `slos:` and the committed rules diverge.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import series
from exporter.monitoring.records import NOT_PREFILL, RecordingRule
from exporter.settings import SloTarget

ERROR_RATIO_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
BURN_WINDOWS = ERROR_RATIO_WINDOWS  # every window some condition reads
#: the workbook's SLO period
BUDGET_PERIOD = "30d"


@dataclass(frozen=True)
class BurnCondition:
    """Burn past `factor` over both windows: the long one for significance, the short for reset."""

    factor: float
    long: str
    short: str


FAST_BURN = (BurnCondition(14.4, "1h", "5m"), BurnCondition(6.0, "6h", "30m"))
SLOW_BURN = (BurnCondition(3.0, "1d", "2h"), BurnCondition(1.0, "3d", "6h"))


#: nearest the client first: the alerts read the first that exists
CLOSEST_FIRST = ("probe", "gateway", "engine")


class SloRecordNames:
    @staticmethod
    def point_error_ratio(window: str) -> str:
        return f"slo_point:llm_slo_error_ratio:rate{window}"

    @staticmethod
    def error_ratio(window: str) -> str:
        return f"slo:llm_slo_error_ratio:rate{window}"

    @staticmethod
    def burn_rate(window: str) -> str:
        return f"slo:llm_slo_error_budget_burn_rate:ratio_rate{window}"

    @staticmethod
    def model_attainment(window: str) -> str:
        return f"slo_model:llm_slo_attainment:ratio_rate{window}"

    model_max_rate = "slo_model:llm_capacity_max_request_rate:sum"
    model_headroom = "slo_model:llm_capacity_headroom:ratio"
    model_desired_replicas = "slo_model:llm_capacity_desired_replicas:ceil"
    #: the most any SLO of the model asks for: what an autoscaler reads (deploy/autoscaling/)
    desired_replicas = "model:llm_capacity_desired_replicas:max"


def slo_recording_rules(config: MonitoringConfig) -> list[RecordingRule]:
    """SLO-generic: every SLO's series share them (label `slo`), so they need no per-SLO copy."""
    x, cluster = config.selectors.exporter, config.labels.cluster
    names = SloRecordNames
    by = f"{cluster}, slo, dimension"
    rules: list[RecordingRule] = []
    for w in ERROR_RATIO_WINDOWS:
        events = f"sum by ({by}, measured_at) (rate({series('llm_slo_events_total', x, NOT_PREFILL)}[{w}]))"
        good = f"sum by ({by}, measured_at) (rate({series('llm_slo_good_events_total', x, NOT_PREFILL)}[{w}]))"
        rules.append(RecordingRule(names.point_error_ratio(w), f"1 - {good}\n/\n({events} > 0)"))
    for w in ERROR_RATIO_WINDOWS:
        points = [f'{names.point_error_ratio(w)}{{measured_at="{point}"}}' for point in CLOSEST_FIRST]
        rules.append(RecordingRule(names.error_ratio(w), f"\nor on ({by})\n".join(points)))
    objective = f"max by ({cluster}, slo) ({series('llm_slo_objective_ratio', x)})"
    for w in BURN_WINDOWS:
        rules.append(
            RecordingRule(
                names.burn_rate(w),
                f"{names.error_ratio(w)}\n/ on ({cluster}, slo) group_left ()\n(1 - {objective} > 0)",
            )
        )
    w = config.rate_interval
    by_model = f"{cluster}, slo, dimension, model"
    engine = f'measured_at="engine", {NOT_PREFILL}'
    rules.append(
        RecordingRule(
            names.model_attainment(w),
            f"sum by ({by_model}) (rate({series('llm_slo_good_events_total', x, engine)}[{w}]))\n/\n"
            f"(sum by ({by_model}) (rate({series('llm_slo_events_total', x, engine)}[{w}])) > 0)",
        )
    )
    # Across a model's replicas: capacities add; headroom is what the model's offered rate leaves.
    # A disaggregated model's pools each carry every request (the prefill leg, then the decode
    # leg), so capacity and load add within a pool (`role`) and never across the two.
    rules.append(
        RecordingRule(
            names.model_max_rate,
            f"sum by ({cluster}, slo, model, role) ({series('llm_capacity_max_request_rate', x)})",
        )
    )
    requests = (
        f"sum by ({cluster}, model, role) (rate({series('llm_engine_e2e_request_latency_seconds_count', x)}[{w}]))"
    )
    rules.append(
        RecordingRule(
            names.model_headroom,
            f"1 - {requests}\n/ on ({cluster}, model, role) group_right ()\n({names.model_max_rate} > 0)",
        )
    )
    # Replicas: each exporter exports its replicas' fractional shares (exporter/slo/replicas.py);
    # their sum over the cluster is the model's need, per disaggregated pool where engines carry `role`.
    pool = f"{cluster}, slo, model, role"
    rules.append(
        RecordingRule(
            names.model_desired_replicas,
            f"ceil(sum by ({pool}) ({series('llm_capacity_desired_replicas', x)}))",
        )
    )
    rules.append(
        RecordingRule(names.desired_replicas, f"max by ({cluster}, model, role) ({names.model_desired_replicas})")
    )
    return rules


DIMENSION_TEXT = {"ttft": "time to first token", "itl": "inter-token latency", "e2e": "end-to-end latency"}


def burn_expr(slo: SloTarget, dimension: str, conditions: tuple[BurnCondition, ...]) -> str:
    """Burn over the long window (the alert's value) where both windows are past the factor."""
    matcher = f'slo="{slo.name}", dimension="{dimension}"'
    parts = []
    for c in conditions:
        parts.append(
            f"{SloRecordNames.burn_rate(c.long)}{{{matcher}}} > {c.factor:g}\n"
            f"and\n{SloRecordNames.burn_rate(c.short)}{{{matcher}}} > {c.factor:g}"
        )
    return "(\n" + "\n)\nor\n(\n".join(parts) + "\n)"


def describe(conditions: tuple[BurnCondition, ...]) -> str:
    return " or ".join(f"{c.factor:g}× over {c.long} and {c.short}" for c in conditions)
