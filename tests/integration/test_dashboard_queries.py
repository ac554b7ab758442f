"""Every dashboard panel's queries return data from a real Prometheus that scraped `serve`.

Four nodes run side by side, each read by its own exporter and labelled with its own `cluster`
(so a dashboard's `$cluster` picks one): the simulated `healthy`, `kv-cache-saturation` and
`pd-transfer-bound` (a prefill/decode pair, its roles configured) nodes
(engines named after their pods, GPUs attributed through dcgm-exporter's pod labels, as the
simulator's own exporter view does), and an `injected` node, read the way the default flags read a
node (GPUs through NVML, here the NVML stand-in; RDMA ports from sysfs) and holding the rare
conditions: an XID error, clock-throttle reasons, a GPU link trained down and an NVLink link down,
NICs whose link and ECN drifted, an engine target that refuses connections, an SGLang engine that
has just started (its start-up figures, full garbage collections, a throttled cgroup) and a gateway
whose server is down. Prometheus scrapes them and one engine per simulated node every 2 s and
evaluates the committed recording rules.

Each query runs with the dashboard's variables set as an operator would: `$cluster` to the
node's cluster, `$node` and `$model` to its real values (a matcher on a label the family lacks
would then come back empty), `$engine` to one engine on *Engine detail*, "All" (`.*`) elsewhere.
A query must return data for one of the nodes; a panel marked rare (its `rare=` says what fills
it) must return data for `injected`. A rare panel whose families only a device absent here makes
(NEEDS_HARDWARE) is checked against the source that makes them, fed that device's counters.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml

from exporter.generate import monitoring_config
from exporter.monitoring.dashboards import boards
from exporter.monitoring.dashboards.board import PlacedPanel, variables
from exporter.monitoring.promql import metric_names
from exporter.monitoring.rule_files import RULES_PATH
from exporter.simulate.dcgm_text import POD_NAMESPACE
from exporter.sources.node.host_pressure import cgroup_path
from exporter.sources.node.links import LinkHealthSource
from tests import nvml_stub
from tests.integration.gpu_helpers import stub_dir
from tests.integration.monitoring_stack import LOCAL, ManagedProcess, Prometheus, require_binary
from tests.support import (
    FIXTURES,
    REPO,
    REQUEST_BOUND_SECONDS,
    ExporterProcess,
    RouteServer,
    free_port,
    growing,
    respond_with,
    sglang_sliced_page,
)
from tests.sysfs_trees import healthy_roce_node, write_ecn, write_pci_link

pytestmark = pytest.mark.integration

HEALTHY, BOTTLENECK, INJECTED = "healthy", "kv-cache-saturation", "injected"
#: a prefill/decode pair whose hand-over is the bottleneck: the disaggregated dashboard's panels
DISAGGREGATED = "pd-transfer-bound"
INTERVAL_SECONDS = 2
# Generous: five processes share a loaded two-core machine, and the bottleneck must first turn
# active (the diagnosis' level window and hysteresis) before its panels have rows.
DATA_WITHIN_SECONDS = 240
# What `generate` builds from the repository (its deployed SLOs included), and those SLOs measured
# by every exporter, so the SLO dashboard's panels have data to return too.
CONFIG = monitoring_config(REPO)
EXPORTER_CONFIG = {
    "engine_defaults": {"timeout_seconds": 5},
    "slos": [
        {"name": slo.name, "objective": slo.objective, **{f"{d}_seconds": t for d, t in slo.thresholds()}}
        for slo in CONFIG.slos
    ],
    # The SLO dashboard's cost and concurrency panels read what these settings make.
    "capacity": {"gpu_hour_price": {"default": 2.0}, "max_num_seqs": {"default": 256}},
}


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: PlacedPanel
    ref: str
    expr: str

    @property
    def name(self) -> str:
        return f"{self.dashboard} / {self.panel.definition.title} [{self.ref}]"


def _panel_queries() -> list[PanelQuery]:
    found = []
    for board in boards(CONFIG).values():
        for panel in board.panels():
            for ref, query in zip("ABCDEFGHIJ", panel.definition.queries):
                found.append(PanelQuery(board.uid, panel, ref, query.expr))
    return found


@dataclass
class Node:
    cluster: str
    exporter: ExporterProcess
    simulator: ManagedProcess | None = None
    engine_urls: list[str] = field(default_factory=list)
    gateway: RouteServer | None = None
    cgroup: ThrottledCgroup | None = None

    def close(self) -> None:
        self.exporter.close()
        if self.cgroup is not None:
            self.cgroup.close()
        if self.gateway is not None:
            self.gateway.close()
        if self.simulator is not None:
            self.simulator.close()


def _simulated_node(scenario: str, workdir: Path) -> Node:
    """A simulated node and `serve` reading it; engines named after their pods, as in Kubernetes."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    sysfs = workdir / "sysfs"
    simulator = ManagedProcess(
        f"simulate-{scenario}",
        [
            sys.executable,
            "-m",
            "exporter",
            "simulate",
            "--scenario",
            scenario,
            "--listen",
            f"127.0.0.1:{port}",
            "--sysfs-out",
            str(sysfs),
            "--seed",
            "7",
        ],
        workdir,
        f"{base}/healthz",
    )
    try:
        index = requests.get(f"{base}/", timeout=REQUEST_BOUND_SECONDS).json()
        engines = [
            {
                "name": e["pod"],
                "type": e["engine_type"],
                "url": base + e["url"],
                **({"role": e["role"]} if "role" in e else {}),
            }
            for e in index["engines"]
        ]
        config = {
            **EXPORTER_CONFIG,
            "engines": engines,
            # The simulated pods exist only in dcgm-exporter's labels: no processes, no kubelet.
            "gpu_attribution": {
                "engine_pods": {e["name"]: f"{POD_NAMESPACE}/{e['name']}" for e in engines},
                "processes": False,
                "pod_resources_socket": "",
            },
        }
        config_path = workdir / "exporter.yaml"
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        exporter = ExporterProcess(
            "--config",
            str(config_path),
            "--gpu",
            f"dcgm-exporter={base}{index['gpu']['url']}",
            "--sysfs",
            str(sysfs),
            interval=INTERVAL_SECONDS,
        )
    except BaseException:
        simulator.close()
        raise
    return Node(scenario, exporter, simulator, [e["url"] for e in engines])


class ThrottledCgroup:
    """The cgroup v2 `cpu.stat` of this process (it serves the injected node's engines) under the
    exporter's sysfs root, its periods counting on as a CPU limit makes them, 20 % throttled."""

    def __init__(self, sysfs: Path) -> None:
        own = cgroup_path(os.getpid()) or "/"
        self.path = sysfs / "fs" / "cgroup" / own.lstrip("/") / "cpu.stat"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._write(0)
        self._thread = threading.Thread(target=self._count, name="cgroup-cpu-stat", daemon=True)
        self._thread.start()

    def _write(self, periods: int) -> None:
        text = f"usage_usec {periods * 80_000}\nnr_periods {periods}\nnr_throttled {periods // 5}\n"
        text += f"throttled_usec {periods * 4_000}\n"
        partial = self.path.with_suffix(".partial")
        partial.write_text(text, encoding="ascii")
        partial.replace(self.path)

    def _count(self) -> None:
        periods = 0
        while not self._stop.wait(1.0):
            periods += 10  # 100 ms periods
            self._write(periods)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _just_started_sglang(started_at: float) -> Callable[[int], str]:
    """The sliced SGLang page of an engine that started at `started_at` and serves from its first
    scrape on: its process start, its own start-up figures (SGLang 0.5's gauges), its generated
    tokens rising and a full garbage collection every scrape."""

    def page(n: int) -> str:
        lines = [
            "# TYPE process_start_time_seconds gauge",
            f"process_start_time_seconds {started_at:.2f}",
            "# TYPE python_gc_collections_total counter",
            *(f'python_gc_collections_total{{generation="{g}"}} {n * (30 - 10 * g)}' for g in range(3)),
            "# TYPE sglang:engine_startup_time gauge",
            'sglang:engine_startup_time{engine_type="unified",model_name="m"} 41.5',
            "# TYPE sglang:engine_load_weights_time gauge",
            'sglang:engine_load_weights_time{engine_type="unified",model_name="m"} 23.0',
            "# TYPE sglang:generation_tokens_total counter",
            f'sglang:generation_tokens_total{{engine_type="unified",model_name="m"}} {n * 500}',
        ]
        return sglang_sliced_page(n) + "\n".join(lines) + "\n"

    return page


def _degraded_fabric(sysfs: Path) -> None:
    """Two RoCE NICs: mlx5_0 trained to PCIe x8 in its x16 slot, ECN off on mlx5_1's RoCE priority."""
    healthy_roce_node(sysfs, ports=2)
    write_pci_link(sysfs, "mlx5_0", 0, current=(5, 8))
    write_ecn(sysfs, "ens2f0np0", np={3: False}, rp={3: False})


def _injected_node(workdir: Path) -> Node:
    """GPUs from the NVML stand-in (an XID on GPU 5, clock-event reasons on all, GPU 6 trained to
    PCIe x8 while busy, one NVLink link of GPU 3 down, NVLink errors counted on GPU 2), RoCE NICs
    whose links drifted, an engine target nothing listens on (source errors), an SGLang engine
    with slices (tenants, adapters, priority classes) that has just started in a throttled cgroup,
    and a gateway: HAProxy's real exposition with its server down (tests/fixtures/gateways), with a
    probe through it that cannot connect."""
    state = workdir / "nvml-state"
    down = [1] * 17 + [0]
    node = nvml_stub.with_changes(
        nvml_stub.with_links(nvml_stub.eight_gpu_node()),
        gpu2={"nvlink_error.0.2": 5},  # NVML_NVLINK_ERROR_DL_CRC_FLIT
        gpu3={"nvlink_states": down},
        gpu6={"pcie_width": 8},
    )
    node["xid_events"] = [(5, 79)]
    nvml_stub.write_state(state, node)
    sysfs = workdir / "sysfs"
    _degraded_fabric(sysfs)
    gateway = RouteServer(
        {
            "/metrics": respond_with((FIXTURES / "gateways" / "haproxy-2.6-backend-down.txt").read_text()),
            # An SGLang engine whose requests carry tenants, adapters and priority classes (its
            # counts grow on every scrape, so the slices' windows have increases): the slice panels.
            "/sliced": growing(_just_started_sglang(time.time())),
        }
    )
    cgroup = ThrottledCgroup(sysfs)
    config = {
        **EXPORTER_CONFIG,
        "engines": [
            {"name": "a-sliced", "type": "sglang", "url": gateway.url("/sliced")},
            {"name": "refused", "type": "vllm", "url": f"http://127.0.0.1:{free_port()}/metrics"},
        ],
        "engine_defaults": {
            **EXPORTER_CONFIG["engine_defaults"],
            "slice_labels": {"tenant": ["tenant"], "adapter": ["adapter"], "priority": ["priority"]},
        },
        "gpu_attribution": {"processes": False, "pod_resources_socket": ""},
        "gateways": [{"name": "haproxy", "url": gateway.url("/metrics"), "engines": ["refused"]}],
        "probes": [
            {"name": "clients", "url": f"http://127.0.0.1:{free_port()}/v1", "model": "m", "interval_seconds": 5}
        ],
    }
    config_path = workdir / "exporter.yaml"
    config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
    try:
        exporter = ExporterProcess(
            "--config",
            str(config_path),
            "--gpu",
            "nvml",
            "--sysfs",
            str(sysfs),
            interval=INTERVAL_SECONDS,
            env=nvml_stub.child_env(stub_dir(), state),
        )
    except BaseException:
        gateway.close()
        cgroup.close()
        raise
    return Node(INJECTED, exporter, gateway=gateway, cgroup=cgroup)


def _prometheus_config(nodes: list[Node]) -> dict:
    """deploy/local/prometheus.yml with these targets, the committed rules and short intervals."""
    config = yaml.safe_load((LOCAL / "prometheus.yml").read_text(encoding="utf-8"))
    config["global"]["scrape_interval"] = f"{INTERVAL_SECONDS}s"
    config["global"]["evaluation_interval"] = f"{INTERVAL_SECONDS}s"
    config["rule_files"] = [str(REPO / RULES_PATH)]
    config.pop("alerting", None)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    jobs["llm-bottleneck-exporter"]["static_configs"] = [
        {"targets": [f"127.0.0.1:{node.exporter.port}"], "labels": {CONFIG.labels.cluster: node.cluster}}
        for node in nodes
    ]
    # One replica per simulated node feeds the engine-histogram records (latency heatmaps, quantiles)
    # through the engines' job, which the recipe leaves commented out (which path depends on the engine).
    engines = [
        {
            "targets": [url.split("/")[2]],
            "labels": {CONFIG.labels.cluster: node.cluster, "__metrics_path__": "/" + url.split("/", 3)[3]},
        }
        for node in nodes
        for url in node.engine_urls[:1]
    ]
    config["scrape_configs"].append({"job_name": "llm-engines", "static_configs": engines})
    return config


def _regex(value: str) -> str:
    """`value` as a regex inside a PromQL string, escaped as Grafana escapes variable values."""
    return re.sub(r"([.+*?^$()\[\]{}|\\])", r"\\\\\1", value)


@dataclass
class Stack:
    prometheus: Prometheus
    nodes: dict[str, Node]
    started: float
    _values: dict[str, dict[str, str]] = field(default_factory=dict)

    def query(self, expr: str) -> list[dict]:
        return self.prometheus.query(expr)

    def values(self, cluster: str) -> dict[str, str]:
        """Variable values for `cluster`: its node, model and first engine, once they exist."""
        if cluster not in self._values:
            up = self.query(f'llm_engine_up{{{CONFIG.labels.cluster}="{cluster}"}}')
            if not up:
                return {}
            first = min(up, key=lambda s: s["metric"]["engine"])["metric"]
            self._values[cluster] = {
                "cluster": cluster,
                "node": first[CONFIG.labels.node],
                "model": first.get("model", ""),
                "engine": first["engine"],
            }
        return self._values[cluster]

    def substitute(self, query: PanelQuery, cluster: str) -> str | None:
        values = self.values(cluster)
        if not values:
            return None
        single_engine = query.dashboard == "llm-engine-detail"
        replacements = {
            "cluster": cluster,
            "namespace": ".*",
            "node": _regex(values["node"]),
            "model": _regex(values["model"]),
            "engine": _regex(values["engine"]) if single_engine else ".*",
            "slice_by": ".*",
            "slice": ".*",
        }
        return re.sub(r"\$(\w+)", lambda m: replacements[m.group(1)], query.expr)

    def has_data(self, query: PanelQuery, cluster: str) -> bool:
        expr = self.substitute(query, cluster)
        return bool(expr and self.query(expr))

    def wait_for_data(self, queries: list[PanelQuery], clusters: tuple[str, ...]) -> list[PanelQuery]:
        """Poll until each query returns data for one of `clusters`; return those that never did."""
        waiting = list(queries)
        deadline = self.started + DATA_WITHIN_SECONDS
        while waiting:
            waiting = [q for q in waiting if not any(self.has_data(q, c) for c in clusters)]
            if not waiting or time.monotonic() > deadline:
                break
            time.sleep(INTERVAL_SECONDS * 2)
        return waiting

    def diagnostics(self) -> str:
        lines = []
        for node in self.nodes.values():
            lines.append(
                f"{node.cluster}: variable values {self.values(node.cluster)}; exporter log:\n"
                f"{node.exporter.log()[-1500:]}"
            )
        return "\n".join(lines)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    require_binary("prometheus")
    workdir = tmp_path_factory.mktemp("dashboard-queries")
    nodes: dict[str, Node] = {}
    prometheus = None
    try:
        for scenario in (HEALTHY, BOTTLENECK, DISAGGREGATED):
            (workdir / scenario).mkdir()
            nodes[scenario] = _simulated_node(scenario, workdir / scenario)
        (workdir / INJECTED).mkdir()
        nodes[INJECTED] = _injected_node(workdir / INJECTED)
        started = time.monotonic()
        prometheus = Prometheus(_prometheus_config(list(nodes.values())), workdir)
        yield Stack(prometheus, nodes, started)
    finally:
        for closeable in (prometheus, *nodes.values()):
            if closeable is not None:
                closeable.close()


QUERIES = _panel_queries()
COMMON = [q for q in QUERIES if not q.panel.definition.rare]
#: rare panels only a device absent here fills: the title, and the source that makes its families
NEEDS_HARDWARE = {"PFC paused share": "mlx5's per-priority ethtool pause counters, read by the links source"}
RARE = [q for q in QUERIES if q.panel.definition.rare and q.panel.definition.title not in NEEDS_HARDWARE]
ALL_NODES = (HEALTHY, BOTTLENECK, DISAGGREGATED, INJECTED)


def test_the_dashboards_have_panels_of_both_kinds():
    assert len(COMMON) > 100
    assert {q.panel.definition.title for q in RARE} | set(NEEDS_HARDWARE) == {
        "XID errors",
        "Clock throttle reasons",
        "Source errors",
        "Score: ingress and client network",
        "Latency before and in the engine (window means)",
        "Gateway 5xx by code",
        "Probe end-to-end p95 by path",
        "Requests queued at the gateway",
        # slices exist only where a source labels its requests with a tenant, adapter or priority
        "Attainment per slice",
        "Goodput and queue per slice",
        # the node's health findings exist only where a link, port or engine host is unwell
        "Link findings",
        "ECN switched off (per priority)",
        "Link flaps and symbol errors (10m)",
        "Start-up and host findings",
        "GPU link findings",
        "NVLink errors",
        "PFC paused share",
        # start-up figures exist after a start; throttling only under a CPU limit
        "Start-up",
        "CPU throttling",
    }


def test_panels_needing_hardware_read_what_their_source_makes_from_that_hardware(tmp_path: Path):
    """The PFC panel's families come from the links source fed mlx5's ethtool statistics."""
    healthy_roce_node(tmp_path, ports=1)
    stats = {"rx_prio3_pause": 900, "rx_prio3_pause_duration": 2_500_000, "tx_prio3_pause_duration": 0}
    made = {m.name for m in LinkHealthSource(str(tmp_path), ethtool_stats=lambda _: stats).collect(0.0)}
    panels = {q.panel.definition.title: q for q in QUERIES if q.panel.definition.title in NEEDS_HARDWARE}
    assert set(panels) == set(NEEDS_HARDWARE)
    for title, query in panels.items():
        assert metric_names(query.expr) <= made, (title, metric_names(query.expr) - made)


def test_every_panel_query_is_valid_promql_for_prometheus(stack: Stack):
    invalid = {}
    for query in QUERIES:
        expr = re.sub(r"\$(\w+)", ".*", query.expr)
        response = requests.get(
            f"{stack.prometheus.url}/api/v1/query", params={"query": expr}, timeout=REQUEST_BOUND_SECONDS
        )
        if response.status_code != 200:
            invalid[query.name] = response.json().get("error")
    assert not invalid, invalid


def test_every_panel_query_returns_data_for_one_of_the_nodes(stack: Stack):
    empty = stack.wait_for_data(COMMON, ALL_NODES)
    assert not empty, (
        f"{len(empty)} panel queries returned no data for any of {', '.join(ALL_NODES)} within "
        f"{DATA_WITHIN_SECONDS}s:\n" + "\n".join(f"{q.name}: {q.expr}" for q in empty) + "\n" + stack.diagnostics()
    )


def test_rare_condition_panels_return_data_once_the_condition_is_injected(stack: Stack):
    empty = stack.wait_for_data(RARE, (INJECTED,))
    assert not empty, "\n".join(f"{q.name}: {q.expr}" for q in empty) + "\n" + stack.diagnostics()


def test_the_active_bottlenecks_table_names_the_scenarios_stage(stack: Stack):
    stack.wait_for_data([q for q in COMMON if q.panel.key == "active-bottlenecks"], (BOTTLENECK,))
    table = next(q for q in COMMON if q.panel.key == "active-bottlenecks")
    stages = {row["metric"]["stage"] for row in stack.query(stack.substitute(table, BOTTLENECK))}
    assert "kv_cache_capacity" in stages, stack.diagnostics()
    healthy = {row["metric"]["stage"] for row in stack.query(stack.substitute(table, HEALTHY))}
    assert "kv_cache_capacity" not in healthy, stack.diagnostics()


def test_template_variables_list_the_values_the_panels_were_queried_with(stack: Stack):
    stack.wait_for_data([q for q in COMMON if q.panel.key == "running"], (HEALTHY, BOTTLENECK))
    for template in variables(CONFIG, ("datasource", "cluster", "namespace", "node", "model", "engine")):
        match = re.fullmatch(r"label_values\((.*), (\w+)\)", template.query)
        if template.type == "datasource" or match is None:
            continue
        selector, label = match.groups()
        for cluster in (HEALTHY, BOTTLENECK):
            values = stack.values(cluster)
            expr = re.sub(r"\$(\w+)", lambda m, cluster=cluster: {"cluster": cluster}.get(m.group(1), ".*"), selector)
            found = {row["metric"].get(label) for row in stack.query(f"count by ({label}) ({expr})")}
            if template.name == "namespace":
                # Engines configured by URL carry no namespace (discovered ones do): "All" only.
                assert found == {None}
            else:
                assert values[template.name] in found, (template.name, cluster, found)
