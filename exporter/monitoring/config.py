"""The one configuration object of the generated monitoring: alert rules and dashboards.

As kubernetes-mixin's `_config`, it holds everything a deployment tunes — selectors, label names,
thresholds, `for:` durations, severities, the runbook base URL and the PrometheusRule metadata —
so a threshold changed once changes the page and the graph together. Dashboards read the same
object (`thresholds`, `diagnosis`, `selectors`, `labels`, `rate_interval`).

The diagnosis lines are not set here: they are the exporter's own `diagnosis:` section
(`exporter.settings.Thresholds`), which `generate` reads from the deployed exporter configuration
and puts in the MonitoringConfig, so an alert's evidence line is the one the exporter scores against.

Defaults live in the dataclasses below; `load_config(FILE)` overrides any of them from YAML and
names the key of any mistake (`alerts.LLMKVCacheSaturated.for: ...`) as a ConfigError, through
the shared validation layer (`exporter.validation`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from exporter import validation as v
from exporter.health.evaluate import NodeHealth  # noqa: F401 - registers every finding kind
from exporter.health.record import alerts as finding_alerts
from exporter.settings import SloTarget, Thresholds
from exporter.stages import stages
from exporter.validation import ConfigError, load_file

SEVERITIES = ("critical", "warning", "info")
#: The deployed exporter configuration, under the repository root: the diagnosis lines' one home.
DEPLOYED_EXPORTER_CONFIG = "deploy/kubernetes/configmap.yaml"
# Where the diagnosis lines are set instead of here (the monitoring YAML's former `diagnosis:`).
DIAGNOSIS_HOME = (
    f"set the thresholds in the exporter configuration's diagnosis: section ({DEPLOYED_EXPORTER_CONFIG}), "
    "which generate reads"
)
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


@dataclass(frozen=True)
class Selectors:
    """Label matchers spliced into every query, without braces (`job="x", namespace="y"`)."""

    # The exporter's own series (`llm_*`): the job a ServiceMonitor or static config gives it.
    exporter: str = 'job="llm-bottleneck-exporter"'
    # The engines' own histograms (vLLM, SGLang, ...) when Prometheus scrapes the engines too; the
    # latency recording rules read them and fall back to the exporter's quantiles otherwise.
    engines: str = ""


@dataclass(frozen=True)
class LabelNames:
    # Set by an external label or relabeling when several clusters share one Prometheus.
    cluster: str = "cluster"
    # The label naming the node. The exporter runs once per node, so its scrape `instance` is one;
    # use `node` when the ServiceMonitor relabels `__meta_kubernetes_pod_node_name` into it.
    node: str = "instance"


@dataclass(frozen=True)
class AlertThresholds:
    """Lines that exist only for alerts and dashboards; the stage lines are in `diagnosis`."""

    # Latency objective on the cluster-wide P99 time to first token of a model. The seed case
    # breached at 2.5 s from an 800 ms baseline; vllm-doctor flags TTFT p95 at 2 s.
    ttft_p99_seconds: float = 2.0
    # vLLM reserves `gpu_memory_utilization` (0.9) of HBM by design, so 0.9 is normal; past 0.97
    # a CUDA graph capture or a second process runs out of memory.
    gpu_memory_used_ratio: float = 0.97
    # Coefficient of variation (stddev / mean) of GPU busy across nodes and of running requests
    # across a model's replicas; the seed case saw a 35 % spread.
    load_imbalance_cv: float = 0.3
    # Below these loads a spread is noise: an idle cluster is not imbalanced.
    load_imbalance_min_gpu_busy: float = 0.2
    load_imbalance_min_running: float = 5.0
    # Symbol, link-integrity and receive errors: a healthy link counts a handful a day.
    rdma_port_errors_per_second: float = 0.01
    # Gateway 5xx share that pages (SRE book's 99.9 % is too tight for a path with a CPU engine in
    # it; 5 % is where users retry), above a rate where a share means something.
    gateway_error_ratio: float = 0.05
    gateway_min_requests_per_second: float = 0.1
    # Time before the engine per request: a same-zone hop costs milliseconds, half a second is the
    # client network or the gateway, not the model.
    ingress_latency_seconds: float = 0.5
    # Spread of generated tokens/s over a cluster's nodes, (max - min) / max: the seed case's
    # imbalance was 35 %; Poisson noise over a 5m rate keeps a balanced cluster under 10 %.
    load_imbalance_spread: float = 0.25
    # A node is hot (named by the imbalance alert) this far above the per-node mean.
    load_imbalance_hot_node_excess: float = 0.1
    # A straggler's median inter-token latency against the median node's (same load, slower tokens).
    straggler_itl_ratio: float = 1.3
    # An RDMA port this busy that stalls (xmit_wait rising) is congested.
    rdma_link_congested_utilization: float = 0.6
    # A node back from an outage has recovered once it serves this share of the per-node mean.
    node_recovered_load_ratio: float = 0.9
    # Failed KV hand-overs: NIXL counts handshake and notification failures too; a healthy pair
    # fails none, and one a minute and a half is a link or a peer going bad.
    kv_transfer_failures_per_second: float = 0.01


@dataclass(frozen=True)
class Windows:
    # XID errors counted over this window; a new XID series counts while it is younger than it.
    xid_errors: str = "10m"
    # A port pages as down only if it was ACTIVE within this window: never-cabled ports stay quiet.
    rdma_port_down_lookback: str = "1d"
    # A node counts as recovering while it was out within this window; its recovery seconds are
    # summed over it, at the resolution below (a subquery step).
    node_recovery_lookback: str = "30m"
    recovery_resolution: str = "30s"


@dataclass(frozen=True)
class AlertPolicy:
    severity: str
    for_: str  # the rule's `for:` (YAML key `for`)


# The alerts that are not a stage's (a stage's defaults are in its record, exporter/stages/<id>.py).
OTHER_POLICIES: Mapping[str, AlertPolicy] = MappingProxyType(
    {
        "LLMTimeToFirstTokenP99High": AlertPolicy("warning", "10m"),
        "LLMLoadImbalance": AlertPolicy("warning", "30m"),
        "LLMGPUMemoryNearlyFull": AlertPolicy("warning", "15m"),
        "LLMGPUXidErrors": AlertPolicy("warning", "0s"),
        # Serving capacity is gone: page.
        "LLMGPUDown": AlertPolicy("critical", "5m"),
        "LLMRDMAPortDown": AlertPolicy("warning", "5m"),
        "LLMRDMAPortErrors": AlertPolicy("warning", "15m"),
        "LLMEngineDown": AlertPolicy("critical", "5m"),
        "LLMExporterSourceDown": AlertPolicy("warning", "15m"),
        "LLMExporterAbsent": AlertPolicy("warning", "10m"),
        # Error-budget burn (SRE workbook): the windows do the debouncing, so `for` stays short.
        "LLMSLOErrorBudgetBurnFast": AlertPolicy("critical", "2m"),
        "LLMSLOErrorBudgetBurnSlow": AlertPolicy("warning", "15m"),
        "LLMStragglerNode": AlertPolicy("warning", "15m"),
        "LLMRDMALinkCongested": AlertPolicy("warning", "10m"),
        # Lost hand-overs are lost work, but the request is retried or recomputed: a ticket.
        "LLMKVTransferFailures": AlertPolicy("warning", "10m"),
        "LLMKVTransferExpired": AlertPolicy("warning", "5m"),
        "LLMPrefillDecodeImbalance": AlertPolicy("warning", "15m"),
    }
)


def default_policies() -> Mapping[str, AlertPolicy]:
    """Every alert's severity and `for:` by default: the stages' from their records (the stages
    registered now), then the others, then the node's health findings' (exporter/health/alerts.py)."""
    policies = {alert.name: AlertPolicy(alert.severity, alert.for_) for s in stages() for alert in s.alerts}
    health = {alert.name: AlertPolicy(alert.severity, alert.for_) for alert in finding_alerts()}
    return MappingProxyType({**policies, **OTHER_POLICIES, **health})


DEFAULT_RULE_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "app.kubernetes.io/name": "llm-bottleneck-exporter",
        "app.kubernetes.io/component": "alert-rules",
        # kube-prometheus-stack selects PrometheusRules by its Helm release name.
        "release": "kube-prometheus-stack",
    }
)


@dataclass(frozen=True)
class PrometheusRuleMeta:
    name: str = "llm-bottleneck-exporter"
    # The namespace of the rest of deploy/kubernetes (its kustomization and ServiceMonitor).
    namespace: str = "llm-bottleneck-exporter"
    labels: Mapping[str, str] = field(default_factory=lambda: DEFAULT_RULE_LABELS)


@dataclass(frozen=True)
class MonitoringConfig:
    selectors: Selectors = field(default_factory=Selectors)
    labels: LabelNames = field(default_factory=LabelNames)
    # Range of every rate() in rules and dashboards; at least 4 scrape intervals.
    rate_interval: str = "5m"
    # Evaluation interval of the generated rule groups; None keeps Prometheus' global one.
    rule_interval: str | None = None
    # The exporter's diagnosis lines: not a key of the monitoring YAML; `generate` fills it from the
    # deployed exporter configuration's `diagnosis:` section.
    diagnosis: Thresholds = field(default_factory=Thresholds)
    # The exporter's SLOs: not a key of the monitoring YAML either; `generate` fills it from the
    # deployed exporter configuration's `slos:` section (burn-rate rules and the SLO dashboard).
    slos: tuple[SloTarget, ...] = ()
    # The gateways the exporter reads (its `gateways:`), filled the same way: without one, the
    # bottleneck dashboard's ingress row is folded and says how to add one.
    gateways: tuple[str, ...] = ()
    thresholds: AlertThresholds = field(default_factory=AlertThresholds)
    windows: Windows = field(default_factory=Windows)
    alerts: Mapping[str, AlertPolicy] = field(default_factory=default_policies)
    # `runbook_url` = this + "/<AlertName>.md"; the files are docs/runbooks/<AlertName>.md.
    runbook_url_base: str = "https://github.com/llm-bottleneck-exporter/llm-bottleneck-exporter/blob/main/docs/runbooks"
    # The dashboards' link from a series to its exporter's /diagnosis: a Grafana data-link URL,
    # where ${__field.labels.<label>} is a label of the series. None: the node label as the
    # exporter's address (right where the node label is the scrape's `instance`, the default).
    diagnosis_url: str | None = None
    prometheus_rule: PrometheusRuleMeta = field(default_factory=PrometheusRuleMeta)

    def policy(self, alert: str) -> AlertPolicy:
        return self.alerts[alert]

    def diagnosis_link(self) -> str:
        return self.diagnosis_url or f"http://${{__field.labels.{self.labels.node}}}/diagnosis"

    def runbook_url(self, alert: str) -> str:
        return f"{self.runbook_url_base.rstrip('/')}/{alert}.md"


def load_config(path: str | None) -> MonitoringConfig:
    """The defaults, overridden by the YAML file at `path` when one is given. The diagnosis lines
    are the exporter's defaults; `generate` replaces them with the deployed ones."""
    return MonitoringConfig() if path is None else from_mapping(load_file(path))


# The keys of the monitoring YAML: every field but the one the exporter's configuration sets.
YAML_KEYS = tuple(f.name for f in fields(MonitoringConfig) if f.name not in ("diagnosis", "slos", "gateways"))


def from_mapping(data: Any) -> MonitoringConfig:
    """Validate an override mapping into a MonitoringConfig; unknown keys are errors."""
    data = v.mapping(data, "the configuration")
    if "diagnosis" in data:
        raise ConfigError("diagnosis", DIAGNOSIS_HOME)
    if "slos" in data:
        raise ConfigError("slos", f"set the SLOs in the exporter configuration's slos: ({DEPLOYED_EXPORTER_CONFIG})")
    if "gateways" in data:
        raise ConfigError(
            "gateways", f"set the gateways in the exporter configuration's gateways: ({DEPLOYED_EXPORTER_CONFIG})"
        )
    v.known_keys(data, "", YAML_KEYS)
    base = MonitoringConfig()
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key == "selectors":
            changes[key] = _override(base.selectors, value, key, _selector)
        elif key == "labels":
            changes[key] = _override(base.labels, value, key, _label_name)
        elif key == "thresholds":
            changes[key] = _override(base.thresholds, value, key, v.non_negative)
        elif key == "windows":
            changes[key] = _override(base.windows, value, key, v.duration)
        elif key == "alerts":
            changes[key] = _policies(base.alerts, value)
        elif key == "prometheus_rule":
            changes[key] = _rule_meta(base.prometheus_rule, value)
        elif key == "rate_interval":
            changes[key] = v.duration(value, key)
        elif key == "rule_interval":
            changes[key] = None if value is None else v.duration(value, key)
        elif key in ("runbook_url_base", "diagnosis_url"):
            changes[key] = v.string(value, key)
    return replace(base, **changes)


def _override(default: Any, value: Any, where: str, check: Callable[[Any, str], Any]) -> Any:
    """`default` (a dataclass) with the keys of the mapping `value`, each passed through `check`."""
    overrides = v.section(value, where, [f.name for f in fields(default)])
    return replace(default, **{key: check(item, f"{where}.{key}") for key, item in overrides.items()})


def _policies(defaults: Mapping[str, AlertPolicy], value: Any) -> Mapping[str, AlertPolicy]:
    policies = dict(defaults)
    for alert, override in v.mapping(value, "alerts").items():
        where = f"alerts.{alert}"
        if alert not in defaults:
            raise ConfigError(where, f"unknown alert (known: {', '.join(defaults)})")
        override = v.section(override, where, ["severity", "for"])
        policy = policies[alert]
        if "severity" in override:
            policy = replace(policy, severity=v.choice(override["severity"], f"{where}.severity", SEVERITIES))
        if "for" in override:
            policy = replace(policy, for_=v.duration(override["for"], f"{where}.for"))
        policies[alert] = policy
    return MappingProxyType(policies)


def _rule_meta(default: PrometheusRuleMeta, value: Any) -> PrometheusRuleMeta:
    value = v.section(value, "prometheus_rule", ["name", "namespace", "labels"])
    changes: dict[str, Any] = {}
    for key in ("name", "namespace"):
        if key in value:
            changes[key] = v.string(value[key], f"prometheus_rule.{key}")
    if "labels" in value:
        # Merged over the defaults; a label set to null is removed.
        labels = dict(default.labels)
        for name, item in v.mapping(value["labels"], "prometheus_rule.labels").items():
            if item is None:
                labels.pop(str(name), None)
            else:
                labels[str(name)] = v.string(item, f"prometheus_rule.labels.{name}")
        changes["labels"] = MappingProxyType(labels)
    return replace(default, **changes)


def _label_name(value: Any, where: str) -> str:
    """A Prometheus label name: monitoring-specific, so not in the shared validation layer."""
    text = v.string(value, where)
    if not _LABEL_NAME.match(text):
        raise ConfigError(where, f"must be a Prometheus label name, not {text!r}")
    return text


def _selector(value: Any, where: str) -> str:
    if value is None or value == "":
        return ""
    text = v.string(value, where).strip()
    # Selectors are spliced inside braces and into Go-template raw strings in annotations.
    for bad in "{}`":
        if bad in text:
            raise ConfigError(where, f"must be label matchers without {bad!r}, e.g. 'job=\"x\"', not {text!r}")
    return text.rstrip(",")
