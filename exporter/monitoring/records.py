"""Recording rules (`level:metric:operations`) that dashboards and cluster-level alerts read.

- throughput, queue and KV usage per model, from the exporter's normalized families;
- P50/P95/P99 of TTFT, inter-token, end-to-end and queue latency per model across replicas, from
  the engines' own histograms (`sum by (le, ...)` of bucket rates) when Prometheus scrapes the
  engines; without them, the worst replica's windowed quantile from the exporter's summaries,
  which bounds the pooled quantile from above (a mixture's quantile lies between its parts');
- load imbalance: the coefficient of variation of GPU busy across nodes and of running requests
  across a model's replicas;
- each model's best inter-token latency p95 over the diagnosis' baseline window: the line the
  dashboards draw a slowdown against (`itl_slowdown_ratio` times it), as the diagnosis judges one.

Every name these rules read is in the catalogue or in an engine mapping's known names; the
engine histogram names come from the mappings themselves, so a renamed engine family is picked up
in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.catalogue import LATENCY_FAMILIES, QUANTILES
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import series
from exporter.sources.engines import MAPPINGS

# Engines label the served model `model_name` (vLLM, SGLang, trtllm-serve); it becomes `model`,
# the exporter's label, so both sources of a quantile carry the same labels.
_ENGINE_MODEL_LABEL = "model_name"
#: a unified engine has no `role` label, which `!=` matches
NOT_PREFILL, NOT_DECODE = 'role!="prefill"', 'role!="decode"'
#: the latencies of a request as its client sees it: on a disaggregated model both legs hold part
#: of each (the prefill worker's one-token answer, the decode worker's from its own arrival)
REQUEST_LATENCIES = ("time_to_first_token", "inter_token_latency", "e2e_request_latency")


@dataclass(frozen=True)
class RecordingRule:
    record: str
    expr: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        rule: dict[str, object] = {"record": self.record, "expr": self.expr}
        if self.labels:
            rule["labels"] = dict(self.labels)
        return rule


class RecordNames:
    """The recorded series' names for a configuration (the rate window is part of some): every
    rule module (this one, cluster.py) and every reader (alerts, dashboards, report) takes its
    names from here, so a name is built once."""

    def __init__(self, config: MonitoringConfig) -> None:
        w = config.rate_interval
        # per model, from the exporter's families (recording_rules below): `level:metric:operations`
        self.requests_rate, self.prompt_tokens_rate, self.generation_tokens_rate, self.preemptions_rate = (
            f"model:llm_engine_{metric}:sum_rate{w}"
            for metric in ("e2e_request_latency_seconds_count", "prompt_tokens", "generation_tokens", "preemptions")
        )
        self.running, self.waiting = (f"model:llm_engine_requests_{state}:sum" for state in ("running", "waiting"))
        self.kv_usage_max, self.kv_usage_avg = (f"model:llm_engine_kv_cache_usage_ratio:{op}" for op in ("max", "avg"))
        # load imbalance: GPU busy across nodes, running requests across a model's replicas
        self.node_gpu_busy = "node:llm_gpu_utilization_ratio:avg"
        self.cluster_gpu_busy = "cluster:llm_gpu_utilization_ratio:avg"
        self.gpu_busy_cv = "cluster:llm_gpu_utilization_ratio:cv_by_node"
        self.running_cv = "model:llm_engine_requests_running:cv_by_engine"
        # the cluster view: nodes compared with each other (exporter/monitoring/cluster.py's rules)
        tokens = "llm_engine_generation_tokens"
        self.node_tokens = f"node:{tokens}:sum_rate{w}"
        self.node_tokens_mean, self.node_tokens_spread = (
            f"cluster:{tokens}:{op}_by_node_rate{w}" for op in ("avg", "spread")
        )
        self.node_load_ratio = f"node:{tokens}:ratio_to_node_avg_rate{w}"
        self.node_gpus = "node:llm_gpu_up:count"
        self.node_tokens_per_gpu, self.cluster_tokens_per_gpu = (
            f"{level}:{tokens}_per_gpu:rate{w}" for level in ("node", "cluster")
        )
        self.scaling_efficiency = f"cluster:{tokens}_per_gpu:ratio_to_best_node_rate{w}"
        self.node_itl = "node:llm_engine_inter_token_latency_seconds:avg_p50"
        self.node_itl_ratio = "node:llm_engine_inter_token_latency_seconds:ratio_to_median_node_p50"
        self.node_serving = "node:llm_engine_up:min"
        self.node_recovering = "node:llm_node_recovering:bool"
        self.node_recovery_seconds = f"node:llm_node_recovering:seconds_{config.windows.node_recovery_lookback}"
        self.port_congested = "port:llm_rdma_port_congested:bool"
        self.baseline = duration(config.diagnosis.baseline_seconds)
        self.itl_best = f"model:llm_engine_inter_token_latency_seconds:p95_min{self.baseline}"
        self._window = w

    def latency_buckets(self, key: str) -> str:
        """Bucket rates per model and `le`, summed over replicas (engine histograms)."""
        return f"model_le:{LATENCY_FAMILIES[key]}_bucket:sum_rate{self._window}"

    def latency_quantile(self, key: str) -> str:
        """Per model, label `quantile` in 0.5/0.95/0.99."""
        return f"model_quantile:{LATENCY_FAMILIES[key]}:histogram_quantile"


def duration(seconds: float) -> str:
    """Seconds as a Prometheus duration, in the largest whole unit: 600 → "10m"."""
    whole = round(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if whole >= size and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def engine_histogram_names(key: str) -> list[str]:
    """Base names of engine histograms in seconds for one latency, newest spelling first."""
    names: list[str] = []
    for mapping in MAPPINGS.values():
        for histogram in mapping.histograms:
            # A bucket bound in milliseconds (Triton) cannot be rescaled in PromQL: `le` is a label.
            if histogram.key == key and histogram.scale == 1.0:
                names.extend(n for n in histogram.names if n not in names)
    return names


def recording_rules(config: MonitoringConfig) -> list[RecordingRule]:
    names = RecordNames(config)
    exporter = config.selectors.exporter
    cluster, node = config.labels.cluster, config.labels.node
    w = config.rate_interval

    def per_model(op: str, expr: str) -> str:
        return f"{op} by ({cluster}, model) ({expr})"

    # A disaggregated request passes a prefill and a decode worker: it is counted, with its
    # answer, where it ends (the decode leg) and its prompt where it is computed (the prefill leg).
    rules = [
        RecordingRule(
            names.requests_rate,
            per_model(
                "sum", f"rate({series('llm_engine_e2e_request_latency_seconds_count', exporter, NOT_PREFILL)}[{w}])"
            ),
        ),
        RecordingRule(
            names.prompt_tokens_rate,
            per_model("sum", f"rate({series('llm_engine_prompt_tokens_total', exporter, NOT_DECODE)}[{w}])"),
        ),
        RecordingRule(
            names.generation_tokens_rate,
            per_model("sum", f"rate({series('llm_engine_generation_tokens_total', exporter, NOT_PREFILL)}[{w}])"),
        ),
        RecordingRule(
            names.preemptions_rate, per_model("sum", f"rate({series('llm_engine_preemptions_total', exporter)}[{w}])")
        ),
        RecordingRule(names.running, per_model("sum", series("llm_engine_requests_running", exporter))),
        RecordingRule(names.waiting, per_model("sum", series("llm_engine_requests_waiting", exporter))),
        RecordingRule(names.kv_usage_max, per_model("max", series("llm_engine_kv_cache_usage_ratio", exporter))),
        RecordingRule(names.kv_usage_avg, per_model("avg", series("llm_engine_kv_cache_usage_ratio", exporter))),
    ]
    for key, family in LATENCY_FAMILIES.items():
        rules.append(RecordingRule(names.latency_buckets(key), _bucket_rates(config, key)))
        for q in QUANTILES:
            quantile_matcher = f'quantile="{q}"'
            expr = (
                f"histogram_quantile({q:g}, sum by ({cluster}, model, le) ({names.latency_buckets(key)}))"
                f"\nor\nmax by ({cluster}, model) ({series(family, exporter, quantile_matcher)})"
            )
            rules.append(RecordingRule(names.latency_quantile(key), expr, {"quantile": str(q)}))
    itl_p95 = series(names.latency_quantile("inter_token_latency"), 'quantile="0.95"')
    rules.append(RecordingRule(names.itl_best, f"min without (quantile) (min_over_time({itl_p95}[{names.baseline}]))"))
    running = series("llm_engine_requests_running", exporter)
    rules += [
        RecordingRule(
            names.node_gpu_busy, f"avg by ({cluster}, {node}) ({series('llm_gpu_utilization_ratio', exporter)})"
        ),
        RecordingRule(names.cluster_gpu_busy, f"avg by ({cluster}) ({names.node_gpu_busy})"),
        RecordingRule(
            names.gpu_busy_cv,
            f"stddev by ({cluster}) ({names.node_gpu_busy})\n/\n({names.cluster_gpu_busy} > 0)",
        ),
        RecordingRule(  # per pool: a prefill worker runs a few requests where a decode worker runs many
            names.running_cv,
            f"stddev by ({cluster}, model, role) ({running})\n/\n(avg by ({cluster}, model, role) ({running}) > 0)",
        ),
    ]
    return rules


def _bucket_rates(config: MonitoringConfig, key: str) -> str:
    """Bucket rates of every engine's spelling of one histogram, relabelled to `model`.

    `or` keeps the left series where two spellings carry the same labels (an engine exporting a
    family under its new and its deprecated name), so each observation counts once.

    The engines' own histograms carry no role, and a disaggregated model's two legs are not two
    samples of one latency: their buckets summed would put the prefill legs' one-token answers
    among the requests' and pull every quantile down. Such a model (one with a prefill worker) is
    left out of a request latency's buckets; its quantiles are the larger of its workers' (the
    exporter's, per leg): each leg is part of every request, so neither reads above the request,
    and the leg that grew (a starved prefill pool, a slow hand-over) is the one read.
    """
    parts = [
        f"label_replace(rate({series(name + '_bucket', config.selectors.engines)}[{config.rate_interval}]), "
        f'"model", "$1", "{_ENGINE_MODEL_LABEL}", "(.+)")'
        for name in engine_histogram_names(key)
    ]
    inner = "\n  or\n  ".join(parts)
    cluster = config.labels.cluster
    summed = f"sum by ({cluster}, model, le) (\n  {inner}\n)"
    if key not in REQUEST_LATENCIES:
        return summed
    prefill_workers = series("llm_engine_role_info", config.selectors.exporter, 'role="prefill"')
    return f"{summed}\nunless on ({cluster}, model)\n{prefill_workers}"
