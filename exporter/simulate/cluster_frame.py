"""The cluster view of `demo` for a `nodes:` scenario: one row per node, then what the cluster rules see.

Read from each node's own exporter (/metrics), as the cluster rules read them from Prometheus:
generated tokens/s per node (from two readings), the spread (max - min) / max and the hot nodes
above the per-node mean, the straggler (median inter-token latency against the median node's),
congested RDMA ports (busy and stalling while the node's median port is not), nodes down. The
lines are the monitoring configuration's (exporter/monitoring/config.py), so the screen and the
alerts agree. It fits 80x24 for up to 8 nodes; a taller cluster shows as many rows as fit.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from exporter.monitoring.config import AlertThresholds

THRESHOLDS = AlertThresholds()


@dataclass
class NodeReading:
    hostname: str
    at: float
    answered: bool = False
    engines: int = 0
    engines_up: int = 0
    running: float = 0.0
    waiting: float = 0.0
    tokens: dict[str, float] = field(default_factory=dict)  # generated tokens by engine
    itl_p50: list[float] = field(default_factory=list)
    sm_clock_mhz: list[float] = field(default_factory=list)
    temperature: list[float] = field(default_factory=list)
    port_utilization: dict[str, float] = field(default_factory=dict)
    port_wait: dict[str, float] = field(default_factory=dict)


def parse_node(hostname: str, text: str | None, at: float) -> NodeReading:
    reading = NodeReading(hostname, at)
    if text is None:
        return reading
    reading.answered = True
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            name, labels, value = s.name, s.labels, float(s.value)
            if name == "llm_engine_up":
                reading.engines += 1
                reading.engines_up += value == 1
            elif name == "llm_engine_requests_running":
                reading.running += value
            elif name == "llm_engine_requests_waiting":
                reading.waiting += value
            elif name == "llm_engine_generation_tokens_total":
                reading.tokens[labels.get("engine", "?")] = value
            elif name == "llm_engine_inter_token_latency_seconds" and labels.get("quantile") == "0.5":
                if value == value:  # NaN: no token in the window
                    reading.itl_p50.append(value)
            elif name == "llm_gpu_sm_clock_hertz":
                reading.sm_clock_mhz.append(value / 1e6)
            elif name == "llm_gpu_temperature_celsius":
                reading.temperature.append(value)
            elif name == "llm_rdma_port_transmit_utilization_ratio":
                reading.port_utilization[labels.get("device", "?")] = value
            elif name == "llm_rdma_port_transmit_wait_total":
                reading.port_wait[labels.get("device", "?")] = value
    return reading


@dataclass(frozen=True)
class NodeRow:
    hostname: str
    state: str  # up, down, or "<up>/<engines>" while some engines do not answer
    tokens_per_second: float | None
    running: float
    waiting: float
    itl_p50: float | None
    sm_clock_mhz: float | None
    temperature: float | None
    rdma_max: float | None
    congested: tuple[str, ...]


def node_rows(before: list[NodeReading] | None, now: list[NodeReading]) -> list[NodeRow]:
    rows = []
    for index, reading in enumerate(now):
        previous = before[index] if before and index < len(before) else None
        rate = None
        common = set(previous.tokens) & set(reading.tokens) if previous else set()
        if previous and common and reading.at > previous.at:
            # Engines read both times; a counter that went back (a restart) counts from zero.
            delta = sum(
                reading.tokens[e] - previous.tokens[e] if reading.tokens[e] >= previous.tokens[e] else reading.tokens[e]
                for e in common
            )
            rate = delta / (reading.at - previous.at) * len(reading.tokens) / len(common)
        congested: tuple[str, ...] = ()
        if previous is not None and reading.port_utilization:
            median = statistics.median(reading.port_utilization.values())
            congested = tuple(
                device
                for device, utilization in sorted(reading.port_utilization.items())
                if utilization >= THRESHOLDS.rdma_link_congested_utilization
                and reading.port_wait.get(device, 0) > previous.port_wait.get(device, 0)
                and median < THRESHOLDS.rdma_link_congested_utilization
            )
        state = "down" if not reading.answered or not reading.engines_up else "up"
        if state == "up" and reading.engines_up < reading.engines:
            state = f"{reading.engines_up}/{reading.engines}"
        rows.append(
            NodeRow(
                reading.hostname,
                state,
                rate,
                reading.running,
                reading.waiting,
                statistics.mean(reading.itl_p50) if reading.itl_p50 else None,
                statistics.mean(reading.sm_clock_mhz) if reading.sm_clock_mhz else None,
                max(reading.temperature) if reading.temperature else None,
                max(reading.port_utilization.values()) if reading.port_utilization else None,
                congested,
            )
        )
    return rows


@dataclass(frozen=True)
class ClusterFindings:
    spread: float | None
    hot: tuple[str, ...]
    stragglers: tuple[tuple[str, float], ...]
    congested: tuple[str, ...]
    down: tuple[str, ...]


def findings(rows: list[NodeRow]) -> ClusterFindings:
    rates = {r.hostname: r.tokens_per_second for r in rows if r.tokens_per_second is not None}
    spread: float | None = None
    hot: tuple[str, ...] = ()
    if len(rates) >= 2 and max(rates.values()) > 0:
        spread = (max(rates.values()) - min(rates.values())) / max(rates.values())
        mean = statistics.mean(rates.values())
        if spread > THRESHOLDS.load_imbalance_spread:
            hot = tuple(h for h, r in rates.items() if r > mean * (1 + THRESHOLDS.load_imbalance_hot_node_excess))
    itls = {r.hostname: r.itl_p50 for r in rows if r.itl_p50}
    stragglers: tuple[tuple[str, float], ...] = ()
    if len(itls) >= 2:
        median = statistics.median(itls.values())
        stragglers = tuple(
            (h, v / median) for h, v in itls.items() if v is not None and v / median > THRESHOLDS.straggler_itl_ratio
        )
    return ClusterFindings(
        spread,
        hot,
        stragglers,
        tuple(f"{r.hostname}/{d}" for r in rows for d in r.congested),
        tuple(r.hostname for r in rows if r.state == "down"),
    )


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def render_cluster(title: list[str], rows: list[NodeRow], alerts: list[str], width: int, height: int) -> list[str]:
    """The screen as lines of at most `width` characters, at most `height` of them."""
    found = findings(rows)
    header = (
        f"{'node':14}{'state':>8}{'tok/s':>8}{'run':>6}{'wait':>6}{'ITL p50':>9}{'SM MHz':>8}{'temp':>6}{'RDMA':>6}"
    )
    table = [header] + [
        f"{r.hostname[:14]:14}{r.state:>8}{_num(r.tokens_per_second, '.0f'):>8}{r.running:6.0f}{r.waiting:6.0f}"
        f"{_num(None if r.itl_p50 is None else r.itl_p50 * 1000, '.1f') + 'ms':>9}{_num(r.sm_clock_mhz, '.0f'):>8}"
        f"{_num(r.temperature, '.0f'):>6}{_num(r.rdma_max, '.2f'):>6}"
        for r in rows
    ]
    spread = "–" if found.spread is None else f"{found.spread:.0%}"
    lines = [
        f"cluster  spread {spread} (line {THRESHOLDS.load_imbalance_spread:.0%})"
        + (f" · hot: {', '.join(found.hot)}" if found.hot else " · no hot node"),
        "straggler "
        + (
            ", ".join(f"{h} {ratio:.2f}x median ITL" for h, ratio in found.stragglers)
            if found.stragglers
            else f"none (line {THRESHOLDS.straggler_itl_ratio:g}x the median node's ITL)"
        ),
        "links    " + (f"congested {', '.join(found.congested)}" if found.congested else "no congested RDMA link"),
        "nodes    " + (f"not serving: {', '.join(found.down)}" if found.down else f"all {len(rows)} serving"),
        "alerts   " + (", ".join(alerts) if alerts else "none firing or pending"),
    ]
    budget = max(0, height - len(title) - len(lines) - 1)
    shown = table[: max(1, budget)]
    if len(shown) < len(table):
        shown[-1] = f"… {len(table) - len(shown) + 1} more nodes: see the index"
    return [line[:width] for line in (*title, *shown, "─" * min(width, 80), *lines)][:height]


def plain_cluster_line(t: float, rows: list[NodeRow], alerts: list[str]) -> str:
    found = findings(rows)
    spread = "-" if found.spread is None else f"{found.spread:.2f}"
    return (
        f"t={t:.0f}s nodes={len(rows)} serving={len(rows) - len(found.down)} spread={spread} "
        f"hot={','.join(found.hot) or '-'} straggler={','.join(h for h, _ in found.stragglers) or '-'} "
        f"congested={','.join(found.congested) or '-'} alerts={','.join(alerts) or '-'}"
    )
