"""Cluster diagnosis: PromQL over every node's exporter — imbalance, scaling loss, stragglers, links, recovery.

The exporter runs once per node and knows nothing of its peers; these rules compare the nodes:

- load imbalance: each node's generated tokens/s against the per-node mean of its cluster; the
  spread is (max - min) / max over nodes (the seed case's 35 %), and the alert names every hot node
  (more than `load_imbalance_hot_node_excess` above the mean) while the spread passes its line.
  Tokens/s rather than GPU busy: a continuously batching engine keeps its GPUs busy at any load;
- scaling loss: tokens/s per GPU of the whole cluster against its best node's (what a GPU does
  within one node when nothing across nodes holds it back); 1 - that ratio is the loss;
- stragglers: a node whose engines' median inter-token latency stands above the median node's by
  `straggler_itl_ratio`, with its clocks, temperature, load and RDMA figures as evidence. Same
  load, slower tokens: throttling, a degraded NIC, a noisy neighbour;
- congested links: an RDMA port that runs near its rate and stalls (xmit_wait) while the node's
  other ports do not, named by node, device and port;
- recovery: a node back from an outage (its engines down within `node_recovery_lookback`) that
  serves less than `node_recovered_load_ratio` of the per-node mean is recovering; the seconds it
  spends so are recorded.

All of it groups by the configured cluster and node labels, so one Prometheus (or a global view
over several, docs/scaling.md) holds several clusters apart.
"""

from __future__ import annotations

import re

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import series
from exporter.monitoring.records import NOT_PREFILL, RecordingRule, RecordNames


def cluster_records(config: MonitoringConfig) -> list[RecordingRule]:
    n = RecordNames(config)
    x, w = config.selectors.exporter, config.rate_interval
    cluster, node = config.labels.cluster, config.labels.node
    t, win = config.thresholds, config.windows
    by_node = f"by ({cluster}, {node})"
    on_node = f"on ({cluster}, {node})"
    p50 = 'quantile="0.5"'
    median_itl = f"avg {by_node} ({series('llm_engine_inter_token_latency_seconds', x, p50)})"
    up = series("up", x)
    return [
        # a prefill worker answers one token per request: its share of the load is not in tokens
        RecordingRule(
            n.node_tokens,
            f"sum {by_node} (rate({series('llm_engine_generation_tokens_total', x, NOT_PREFILL)}[{w}]))",
        ),
        RecordingRule(n.node_tokens_mean, f"avg by ({cluster}) ({n.node_tokens})"),
        RecordingRule(
            n.node_tokens_spread,
            f"(max by ({cluster}) ({n.node_tokens}) - min by ({cluster}) ({n.node_tokens}))\n"
            f"/\n(max by ({cluster}) ({n.node_tokens}) > 0)",
        ),
        RecordingRule(
            n.node_load_ratio, f"{n.node_tokens}\n/ on ({cluster}) group_left ()\n({n.node_tokens_mean} > 0)"
        ),
        RecordingRule(n.node_gpus, f"count {by_node} ({series('llm_gpu_up', x)} == 1)"),
        RecordingRule(n.node_tokens_per_gpu, f"{n.node_tokens}\n/ {on_node}\n({n.node_gpus} > 0)"),
        RecordingRule(
            n.cluster_tokens_per_gpu,
            f"sum by ({cluster}) ({n.node_tokens})\n/\n(sum by ({cluster}) ({n.node_gpus}) > 0)",
        ),
        RecordingRule(
            n.scaling_efficiency,
            f"{n.cluster_tokens_per_gpu}\n/\n(max by ({cluster}) ({n.node_tokens_per_gpu}) > 0)",
        ),
        RecordingRule(n.node_itl, median_itl),
        RecordingRule(
            n.node_itl_ratio,
            f"{n.node_itl}\n/ on ({cluster}) group_left ()\n(quantile by ({cluster}) (0.5, {n.node_itl}) > 0)",
        ),
        # A node whose exporter is gone (the node is lost) counts as not serving, as one whose engines are down.
        RecordingRule(n.node_serving, f"min {by_node} ({series('llm_engine_up', x)})\nor\nmax {by_node} ({up}) == 0"),
        RecordingRule(
            n.node_recovering,
            f"({n.node_load_ratio} < bool {t.node_recovered_load_ratio:g})\n"
            f"* {on_node}\n(min_over_time({n.node_serving}[{win.node_recovery_lookback}]) == bool 0)\n"
            f"* {on_node}\n({n.node_serving} == bool 1)",
        ),
        RecordingRule(
            n.node_recovery_seconds,
            f"sum_over_time({n.node_recovering}[{win.node_recovery_lookback}:{win.recovery_resolution}])"
            f" * {_seconds(win.recovery_resolution):g}",
        ),
        RecordingRule(
            n.port_congested,
            f"({series('llm_rdma_port_transmit_utilization_ratio', x)} >= bool {t.rdma_link_congested_utilization:g})\n"
            f"* (rate({series('llm_rdma_port_transmit_wait_total', x)}[{w}]) > bool 0)",
        ),
    ]


_DURATION_PART = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def _seconds(duration: str) -> float:
    """Seconds in a Prometheus duration (`1h30m`); the subquery step times a sum of 0/1 samples."""
    return sum(int(amount) * _UNIT_SECONDS[unit] for amount, unit in _DURATION_PART.findall(duration))
