"""`simulate` and `demo`: their arguments and what they run (exporter/cli.py only wires them in).

llm-bottleneck-exporter simulate --list
llm-bottleneck-exporter simulate --scenario NAME|FILE [--listen HOST:PORT] [--sysfs-out DIR] [--seed N]
llm-bottleneck-exporter demo [--scenario NAME|FILE] [--listen HOST:PORT] [--duration SECONDS] [--refresh S] [--plain]
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from exporter.config import parse_listen
from exporter.validation import ConfigError

if TYPE_CHECKING:
    from exporter.simulate.scenario import Scenario


class _Serving(Protocol):
    def write_sysfs(self) -> None: ...
    def start(self) -> object: ...
    def stop(self) -> None: ...


_Server = TypeVar("_Server", bound=_Serving)

DEFAULT_SIMULATE_LISTEN = "127.0.0.1:8000"
log = logging.getLogger("exporter.simulate")


def add_simulate_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    parser = add_parser(
        "simulate",
        help="run a simulated inference node (vLLM, dcgm-exporter and RDMA sysfs signals)",
        description="Serve a simulated node: vLLM metrics at /engine/<i>/metrics, dcgm-exporter metrics at "
        "/gpu/metrics, a JSON index at /, and a live class/infiniband tree under --sysfs-out.",
    )
    parser.add_argument("--scenario", metavar="NAME|FILE", help="built-in scenario name or YAML file")
    parser.add_argument("--list", action="store_true", help="list the built-in scenarios with their expected stages")
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=DEFAULT_SIMULATE_LISTEN,
        help=f"address to serve on (default {DEFAULT_SIMULATE_LISTEN})",
    )
    parser.add_argument("--sysfs-out", metavar="DIR", help="keep a live class/infiniband tree under DIR")
    parser.add_argument("--seed", metavar="N", type=int, help="random seed (default: the scenario's)")
    parser.add_argument("--duration", metavar="SECONDS", type=float, help="stop after this many seconds")


def add_demo_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    parser = add_parser(
        "demo",
        help="a simulated node plus the exporter, with a live view of the key signals",
        description="Start a simulated node (prompt-growth by default) and the exporter reading it, and show "
        "the exporter's view of it every few seconds, redrawn in place: per engine the primary stage, its evidence "
        "and action from /diagnosis, the phase and what it expects, firing pages and where to look next. "
        "Ctrl-C stops everything.",
    )
    parser.add_argument(
        "--scenario",
        metavar="NAME|FILE",
        default="prompt-growth",
        help="built-in scenario name or YAML file (default prompt-growth)",
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default="127.0.0.1:9477",
        help="where the exporter serves /metrics (default 127.0.0.1:9477)",
    )
    parser.add_argument("--seed", metavar="N", type=int, help="random seed (default: the scenario's)")
    parser.add_argument("--duration", metavar="SECONDS", type=float, help="stop after this many seconds")
    parser.add_argument("--refresh", metavar="SECONDS", type=float, default=3.0, help="view refresh (default 3)")
    from exporter.simulate.case_review import add_case_review_flags

    add_case_review_flags(parser)
    parser.add_argument(
        "--plain",
        action="store_true",
        help="print one line per frame instead of redrawing the screen (the default when stdout is not a terminal)",
    )


def run_command(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)r",
    )
    if args.duration is not None and args.duration <= 0:
        raise ConfigError("--duration", f"must be greater than 0, not {args.duration:g}")
    if args.command == "demo":
        from exporter.simulate.demo import run_demo

        return run_demo(args)
    return run_simulate(args)


def list_scenarios() -> str:
    from exporter.simulate.scenario import builtin_names, cluster_names, load_scenario

    lines = []
    for heading, names in (
        ("", builtin_names()),
        ("cluster scenarios (several nodes, one address each):", cluster_names()),
    ):
        if heading:
            lines.append(heading)
        for name in names:
            scenario = load_scenario(name)
            nodes = f"{scenario.cluster.count} nodes, finds {scenario.cluster.expect}: " if scenario.cluster else ""
            lines.append(f"{name:24} {nodes}{scenario.stages_text}")
            summary = " ".join(scenario.description.split()).split(". ")[0].rstrip(".") + "."
            lines.extend("    " + line for line in textwrap.wrap(summary, 96))
    return "\n".join(lines) + "\n"


def run_simulate(args: argparse.Namespace) -> int:
    if args.list:
        sys.stdout.write(list_scenarios())
        return 0
    if not args.scenario:
        raise ConfigError("--scenario", "required (or --list to see the built-in scenarios)")
    from exporter.simulate.node import SimulatedNode
    from exporter.simulate.scenario import load_scenario
    from exporter.simulate.server import SimulationServer

    host, port = parse_listen(args.listen, "--listen")
    scenario = load_scenario(args.scenario)
    if scenario.cluster is not None:
        return run_cluster(args, scenario, host, port)
    node = SimulatedNode(scenario, args.seed)
    server = _started(lambda: SimulationServer(node, host, port, args.sysfs_out), args)
    engines = ", ".join(f"{server.url}/engine/{i}/metrics" for i in range(len(node.replicas)))
    print(
        f"simulating {scenario.name} ({scenario.stages_text}) on {server.url}/  engines: {engines}  "
        f"gpus: {server.url}/gpu/metrics" + (f"  sysfs: {args.sysfs_out}" if args.sysfs_out else ""),
        flush=True,
    )
    return _serve_until_stopped(server, args.duration)


def _serve_until_stopped(server: _Serving, duration: float | None) -> int:
    """Serve until SIGINT, SIGTERM or --duration, then stop the server."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait(duration)
    server.stop()
    return 0


def _started(make: Callable[[], _Server], args: argparse.Namespace) -> _Server:
    """Bind (a busy --listen is a ConfigError), write the sysfs tree if asked, start serving."""
    try:
        server = make()
    except OSError as exc:
        raise ConfigError("--listen", f"cannot listen on {args.listen}: {exc.strerror or exc}") from exc
    if args.sysfs_out:
        try:
            server.write_sysfs()
        except OSError as exc:
            raise ConfigError("--sysfs-out", f"cannot write {args.sysfs_out}: {exc.strerror or exc}") from exc
    server.start()
    return server


def run_cluster(args: argparse.Namespace, scenario: Scenario, host: str, port: int) -> int:
    """A `nodes:` scenario: one server per node on its own port, the cluster's index on --listen."""
    from exporter.simulate.cluster import ClusterServer, SimulatedCluster

    cluster = SimulatedCluster(scenario, args.seed)
    server = _started(lambda: ClusterServer(cluster, host, port, args.sysfs_out), args)
    nodes = "  ".join(f"{n.node.scenario.node.hostname}={n.url}/" for n in server.nodes)
    print(
        f"simulating {scenario.name} ({len(server.nodes)} nodes, finds {cluster.expect}) "
        f"index {server.url}/  nodes: {nodes}" + (f"  sysfs: {args.sysfs_out}/<hostname>" if args.sysfs_out else ""),
        flush=True,
    )
    return _serve_until_stopped(server, args.duration)
