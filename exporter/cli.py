"""Command line: `serve`, `once`, `check-config`, `generate`, `report`, `simulate`, `demo`.

User errors (bad flags, bad configuration, a port in use) print one line naming the flag or key
and exit 2; tracebacks are for bugs only.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from exporter import __version__
from exporter.app import Exporter
from exporter.config import ConfigError, build, load_file, parse_engine_flag, parse_gateway_flag
from exporter.exposition import RenderedSnapshot, render_text
from exporter.monitoring.config import DEPLOYED_EXPORTER_CONFIG
from exporter.server import ExporterHTTPServer
from exporter.settings import Config
from exporter.webguard import WebGuard

PROG = "llm-bottleneck-exporter"
EXIT_USAGE = 2
_DEFAULTS = Config()  # the help texts quote the settings' defaults, never a copy
#: `once` when every configured engine failed to answer
EXIT_NO_ENGINE = 1
log = logging.getLogger("exporter")


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line (and exit 2), as all our user errors are."""

    def error(self, message: str) -> NoReturn:
        print(f"{PROG}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _add_source_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="YAML configuration file")
    parser.add_argument("--listen", metavar="HOST:PORT", help=f"address to serve on (default {_DEFAULTS.listen})")
    parser.add_argument(
        "--engine",
        action="append",
        metavar="[TYPE=]URL",
        help="engine metrics URL, repeatable; TYPE is vllm, sglang, tgi, trtllm or triton "
        "(detected from the metric names when omitted); replaces engines from the file",
    )
    parser.add_argument(
        "--gateway",
        action="append",
        metavar="[TYPE=]URL",
        help="gateway metrics URL, repeatable; TYPE is epp, envoy-ai-gateway, litellm, haproxy or ingress-nginx "
        "(detected from the metric names when omitted); replaces gateways from the file",
    )
    parser.add_argument(
        "--gpu",
        metavar="MODE",
        help="auto, nvml, dcgm, dcgm-exporter=URL, amdsmi, amd-exporter=URL, ascend-exporter=URL, "
        f"gaudi-exporter=URL or none (default {_DEFAULTS.gpu.mode})",
    )
    parser.add_argument("--sysfs", metavar="DIR", help=f"sysfs mount point (default {_DEFAULTS.sysfs})")
    parser.add_argument(
        "--interval", metavar="SECONDS", help=f"collection interval (default {_DEFAULTS.interval_seconds:g})"
    )
    parser.add_argument(
        "--window",
        metavar="SECONDS",
        help=f"window for latency quantiles and ratios (default {_DEFAULTS.window_seconds:g})",
    )
    parser.add_argument(
        "--log-level", metavar="LEVEL", help=f"debug, info, warning or error (default {_DEFAULTS.log_level})"
    )


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Per-node exporter that diagnoses the bottleneck stage of LLM serving.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    serve = commands.add_parser("serve", help="collect in the background and serve /metrics")
    _add_source_options(serve)
    serve.add_argument(
        "--web.config.file",
        dest="web_config_file",
        metavar="FILE",
        help="TLS and basic auth, in the Prometheus exporter-toolkit web config format",
    )
    once = commands.add_parser("once", help="collect once and print the exposition to stdout")
    _add_source_options(once)
    once.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: Prometheus exposition; json: the /diagnosis document",
    )
    check = commands.add_parser("check-config", help="validate a configuration file (exit 2 when invalid)")
    check.add_argument("file", metavar="FILE")
    generate = commands.add_parser(
        "generate", help="write the generated alert rules and manifests; --check exits 1 when a committed file is stale"
    )
    generate.add_argument("--out", metavar="DIR", default=".", help="repository root to write under (default .)")
    generate.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale file")
    generate.add_argument("--config", metavar="FILE", help="YAML overrides of the monitoring configuration")
    generate.add_argument(
        "--exporter-config",
        metavar="FILE",
        help="exporter configuration whose diagnosis: thresholds the rules and dashboards use, plain YAML or a "
        f"ConfigMap with a config.yaml key (default DIR/{DEPLOYED_EXPORTER_CONFIG})",
    )
    from exporter.simulate.cli import add_demo_parser, add_simulate_parser

    add_simulate_parser(commands)
    add_demo_parser(commands)
    from exporter.report.cli import add_report_parser

    add_report_parser(commands)
    return parser


def config_from_args(args: argparse.Namespace) -> Config:
    file_data = load_file(args.config) if args.config else {}
    flags: dict[str, tuple[Any, str]] = {}
    for key, attr, flag in (
        ("listen", "listen", "--listen"),
        ("interval_seconds", "interval", "--interval"),
        ("window_seconds", "window", "--window"),
        ("gpu", "gpu", "--gpu"),
        ("sysfs", "sysfs", "--sysfs"),
        ("log_level", "log_level", "--log-level"),
    ):
        value = getattr(args, attr)
        if value is not None:
            flags[key] = (value, flag)
    if args.engine:
        flags["engines"] = ([parse_engine_flag(text) for text in args.engine], "--engine")
    if args.gateway:
        flags["gateways"] = ([parse_gateway_flag(text) for text in args.gateway], "--gateway")
    if getattr(args, "web_config_file", None):
        flags["web_config_file"] = (args.web_config_file, "--web.config.file")
    return build(file_data, flags)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)r",
        stream=sys.stderr,
    )


def run_once(config: Config, output_format: str = "text") -> int:
    """Collect once and print; exit 1 when engines are configured and none answered (a script
    that runs `once` must not read an empty exposition as success)."""
    exporter = Exporter(config, lifetime_baseline=True)
    try:
        snapshot = exporter.collect_once()
    finally:
        exporter.stop()
    if output_format == "json":
        sys.stdout.write(json.dumps(exporter.diagnosis(), indent=2) + "\n")
    else:
        sys.stdout.buffer.write(render_text(snapshot))
    sys.stdout.flush()
    engines = [status for status in snapshot.statuses if status.source == "engine"]
    if engines and not any(status.up for status in engines):
        print(f"{PROG}: no engine answered ({len(engines)} configured)", file=sys.stderr)
        return EXIT_NO_ENGINE
    return 0


def run_serve(config: Config, reload_config: Callable[[], Config] | None = None) -> int:
    # Bind before building the sources, whose start-up logs would otherwise precede the one
    # error line of a port in use. Nothing is served before serve_forever.
    web = WebGuard(config.web_config_file) if config.web_config_file else None
    holder: dict[str, Exporter] = {}
    try:
        server = ExporterHTTPServer(
            (config.listen_host, config.listen_port),
            RenderedSnapshot(),
            lambda: holder["exporter"].health() if holder else (False, "starting"),
            lambda: holder["exporter"].diagnosis(),
            web,
        )
    except OSError as exc:
        raise ConfigError("--listen", f"cannot listen on {config.listen}: {exc.strerror or exc}") from exc
    try:
        exporter = holder["exporter"] = Exporter(config)
    except BaseException:
        server.server_close()
        raise
    server.rendered = exporter.rendered
    stop = threading.Event()
    wake = threading.Event()
    reload_requested = threading.Event()

    def _shutdown(signum: int, _frame: object) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()
        wake.set()

    def _hangup(_signum: int, _frame: object) -> None:
        reload_requested.set()
        wake.set()

    signal.signal(signal.SIGTERM, _shutdown)
    signal.signal(signal.SIGINT, _shutdown)
    if reload_config is not None:
        signal.signal(signal.SIGHUP, _hangup)
    exporter.start()
    server_thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    server_thread.start()
    log.info(
        "listening on %s with %d source(s), interval %gs",
        config.listen,
        len(exporter.loop.current_sources()),
        config.interval_seconds,
    )
    while not stop.is_set():
        # A timed wait, not a blocking one: the kernel may deliver SIGTERM or SIGHUP to any
        # thread, and Python runs the handler only when the main thread executes bytecode again.
        # Blocked forever in a lock, it would never see the signal (SIGTERM then needs SIGKILL).
        wake.wait(timeout=0.5)
        wake.clear()
        if reload_requested.is_set() and not stop.is_set() and reload_config is not None:
            reload_requested.clear()
            try:
                new = reload_config()
            except ConfigError as exc:
                exporter.fail_reload(exc)
                continue
            if exporter.reload(new):
                logging.getLogger().setLevel(getattr(logging, new.log_level.upper()))
    server.shutdown()
    server.server_close()
    exporter.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if args.command == "check-config":
            config = build(load_file(args.file))
            print(f"{args.file}: ok ({len(config.engines)} engine target(s))")
            return 0
        if args.command in ("simulate", "demo"):
            from exporter.simulate.cli import run_command

            return run_command(args)
        if args.command == "report":
            from exporter.report.cli import ReportError, run_report

            try:
                return run_report(args)
            except ReportError as exc:
                print(f"{PROG}: error: {exc}", file=sys.stderr)
                return EXIT_USAGE
        if args.command == "generate":
            from exporter.generate import run_generate

            return run_generate(args.out, args.check, args.config, args.exporter_config)
        config = config_from_args(args)
        _setup_logging(config.log_level)
        if args.command == "once":
            return run_once(config, args.format)
        return run_serve(config, lambda: config_from_args(args))
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
