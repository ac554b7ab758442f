"""Benchmark: the real `serve` with 8 hostile targets at their caps, against 8 normal ones.

One exporter process lives through four phases, each configured by rewriting its file and sending
SIGHUP, and each measured from /proc/PID/status:

1. baseline: the node users run (tests/perf/node_under_test.py): 8 normal vLLM targets whose
   values change every scrape, the NVML stand-in's 8 GPUs and 8 RDMA ports, the default 5 s
   interval - peak RSS (VmHWM) and RSS;
2. hostile: the same 8 plus 8 hostile targets at their caps at once (below) - peak RSS, with
   VmHWM reset at the start of the phase, so the figure is that phase's alone;
3. after: back to the 8 normal targets - RSS once the hostile ones are gone;
4. shutdown: a second process, with a target that sends its body a byte a second: seconds from
   SIGTERM to exit.

The hostile targets: 16 MiB (just under the cap) of short lines, the same gzip-compressed, one
wanted line of 16 MiB, 9,000 wanted series of one model with 1,000-character label values (under
max_series and max_label_value_length), a body over the cap, a TGI whose /info is 300 MB, a TGI whose /info
trickles a byte a second, a body that trickles a byte a second. Everything is on loopback and
every trickle stops when the benchmark does. It prints the figures and exits 1 when the hostile
peak is over the budget (256 MiB), 0 otherwise.

    python tests/perf/bench_hostile_targets.py [--phase-seconds S] [--interval S]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.hostile import (  # noqa: E402
    TGI_METRICS,
    endless_json,
    peak_rss_bytes,
    reset_peak_rss,
    rss_bytes,
    short_lines_body,
    trickle,
)
from tests.perf import node_under_test as perf_node  # noqa: E402
from tests.perf.table import Row, print_rows  # noqa: E402
from tests.support import ExporterProcess, RouteServer, respond_with, series_value  # noqa: E402

MiB = 1024 * 1024
CAP = 16 * MiB
BUDGET = 256 * MiB


def gzipped(body: bytes) -> object:
    data = gzip.compress(body, compresslevel=6)

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return respond


def over_the_cap(total: int) -> object:
    """A body with no Content-Length that goes on past the cap, sent 1 MiB at a time."""
    piece = b"ab 1\n" * (MiB // 5)

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain; version=0.0.4")
        handler.send_header("Connection", "close")
        handler.close_connection = True
        handler.end_headers()
        for _ in range(total // len(piece)):
            handler.wfile.write(piece)

    return respond


def hostile_routes(stop: threading.Event) -> dict[str, object]:
    short = short_lines_body(CAP)
    long_line = b"vllm:num_requests_running{" + b'x="y",' * ((CAP - 100) // 6) + b"} 1\n"
    value = "m" * 1000
    # One model: the parse holds 9,000 series of 1,000-character labels at once, the worst under
    # the caps for a fetch; 9,000 *models* would instead be 9,000 readings exported (a cardinality
    # question of what is exported, not of what a fetch holds).
    series = "".join(f'vllm:num_requests_running{{model_name="m",rank="{value}{i}"}} 1\n' for i in range(9000)).encode()
    return {
        "/short-lines": respond_with(short),
        "/short-lines-gzip": gzipped(short),
        "/one-long-line": respond_with(long_line),
        "/many-series": respond_with(series),
        "/over-the-cap": over_the_cap(4 * CAP),
        "/tgi-huge-info/metrics": respond_with(TGI_METRICS),
        "/info": endless_json(300 * MiB),
        "/trickle": trickle(stop, "text/plain; version=0.0.4"),
    }


def trickling_info_server(stop: threading.Event) -> RouteServer:
    """TGI asks /info at its own root, so the trickling /info needs a server of its own."""
    return RouteServer({"/metrics": respond_with(TGI_METRICS), "/info": trickle(stop)})


def outcome(text: str, name: str) -> str:
    """`up` and the errors by reason of one target, from the exporter's own series."""
    errors = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "llm_exporter_source_errors_total" and sample.labels.get("target") == name:
                errors.append(f"{sample.labels['reason']} {sample.value:g}")
    return f"up {series_value(text, 'llm_engine_up', engine=name)}, errors: {', '.join(errors) or 'none'}"


def scrape(exporter: ExporterProcess) -> str:
    """/metrics with a generous timeout: under hostile load on a small machine it may be slow,
    which the benchmark reports (seconds) rather than fails on."""
    return requests.get(exporter.base_url + "/metrics", timeout=60).text


def reload(exporter: ExporterProcess, config: Path, engines: list[dict], reloads: int) -> int:
    config.write_text(yaml.safe_dump({"engines": engines}))
    os.kill(exporter.process.pid, signal.SIGHUP)
    # A round publishes once its slowest source is done: up to the hostile timeout after the signal.
    deadline = time.monotonic() + 90.0
    while series_value(scrape(exporter), "llm_exporter_config_reloads_total", result="success") != reloads + 1:
        if time.monotonic() > deadline:
            raise SystemExit("the reload was not applied within 90 s")
        time.sleep(0.5)
    return reloads + 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase-seconds", type=float, default=20.0, help="baseline and after; hostile: twice")
    parser.add_argument("--interval", type=float, default=perf_node.DEFAULT_INTERVAL)
    parser.add_argument("--hostile-timeout", type=float, default=10.0, help="timeout_seconds of the hostile targets")
    args = parser.parse_args()
    stop = threading.Event()
    workdir = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    node = perf_node.Node(8, args.interval, workdir).start()
    hostile = RouteServer(hostile_routes(stop))
    info_trickle = trickling_info_server(stop)
    for server in (hostile, info_trickle):  # a client hanging up mid-body is the point, not news
        server._server.handle_error = lambda *args: None  # type: ignore[method-assign]
    normal_engines = [
        {"url": url.partition("=")[2], "name": f"normal-{i}", "type": "vllm"}
        for i, url in enumerate(node.engine_urls(8))
    ]
    node_args = (*node.flags, "--gpu", node.gpus)
    vllm_paths = ("/short-lines", "/short-lines-gzip", "/one-long-line", "/many-series", "/over-the-cap", "/trickle")
    hostile_engines = [{"url": hostile.url(p), "name": p.strip("/"), "type": "vllm"} for p in vllm_paths]
    hostile_engines += [
        {"url": hostile.url("/tgi-huge-info/metrics"), "name": "tgi-huge-info", "type": "tgi"},
        {"url": info_trickle.url("/metrics"), "name": "tgi-trickling-info", "type": "tgi"},
    ]
    # Long enough for whole rounds at the caps (8 bodies of 16 MiB share one interpreter): the
    # peak is that of complete parses, not of parses cut at 2 s.
    for engine in hostile_engines:
        engine["timeout_seconds"] = args.hostile_timeout
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump({"engines": normal_engines}))
    started = time.monotonic()
    exporter = ExporterProcess("--config", str(config), *node_args, interval=args.interval, env=node.env)
    try:
        pid = exporter.process.pid
        time.sleep(args.phase_seconds)
        baseline_peak, baseline_rss = peak_rss_bytes(pid), rss_bytes(pid)

        reloads = reload(exporter, config, normal_engines + hostile_engines, 0)
        reset_peak_rss(pid)
        time.sleep(2 * args.phase_seconds)
        hostile_peak = peak_rss_bytes(pid)
        asked = time.monotonic()
        served = scrape(exporter)
        scrape_seconds = time.monotonic() - asked

        reload(exporter, config, normal_engines, reloads)
        time.sleep(args.phase_seconds)
        after_rss = rss_bytes(pid)

        exporter.close()
        # Shutdown in a process of its own: a trickling target's fetch in flight at SIGTERM.
        trickling = {"url": hostile.url("/trickle"), "name": "trickle", "type": "vllm"}
        config.write_text(yaml.safe_dump({"engines": [*normal_engines, trickling]}))
        exporter = ExporterProcess("--config", str(config), *node_args, interval=args.interval, env=node.env)
        time.sleep(2.5)
        sigterm = time.monotonic()
        os.killpg(exporter.process.pid, signal.SIGTERM)
        exporter.process.wait(timeout=120)
        shutdown_seconds = time.monotonic() - sigterm
    finally:
        stop.set()
        exporter.close()
        for server in (hostile, info_trickle):
            server.close()
        node.close()
        shutil.rmtree(workdir, ignore_errors=True)
    took = time.monotonic() - started
    print(
        f"phases of {args.phase_seconds:g} s (hostile {2 * args.phase_seconds:g} s, their timeout "
        f"{args.hostile_timeout:g} s), interval {args.interval:g} s, 8 normal + 8 hostile targets, "
        f"GPUs: {node.gpus} x 8, RDMA: 8 ports ({took:.0f} s in all)"
    )
    print(f"baseline (8 normal):        peak RSS {baseline_peak / MiB:6.1f} MiB, RSS {baseline_rss / MiB:6.1f} MiB")
    print(f"with 8 hostile at caps:     peak RSS {hostile_peak / MiB:6.1f} MiB (budget {BUDGET / MiB:.0f} MiB)")
    print(
        f"after the hostile are gone: RSS      {after_rss / MiB:6.1f} MiB ({(after_rss - baseline_rss) / MiB:+.1f} MiB)"
    )
    print(f"one /metrics scrape during the hostile phase: {scrape_seconds:.2f} s, {len(served) / MiB:.1f} MiB")
    print(f"shutdown after SIGTERM with a 1 byte/s target: {shutdown_seconds:.2f} s")
    for engine in hostile_engines:
        print(f"  {engine['name']:20} {outcome(served, engine['name'])}")
    print_rows(
        "bench_hostile_targets",
        [
            Row(
                "peak RSS with 8 hostile targets at their caps beside the node",
                hostile_peak / MiB,
                "MiB",
                baseline_peak / MiB,
                f"< {BUDGET / MiB:.0f} MiB",
                hostile_peak < BUDGET,
            ),
            Row("RSS once the hostile targets are gone", after_rss / MiB, "MiB", baseline_rss / MiB),
            Row("shutdown after SIGTERM with a 1 byte/s target in flight", shutdown_seconds, "s"),
        ],
        "the same process on the node alone (the phase before)",
    )
    return 0 if hostile_peak < BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
