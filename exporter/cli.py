"""Command line: the daemon's `serve`, `once`, `check-config`, and the tools `generate`,
`simulate`, `demo`, `report`.

User errors (bad flags, bad configuration, a port in use) print one line naming the flag or key
and exit 2; tracebacks are for bugs only. The tools' libraries come with extras of the package
(pyproject.toml), which the DaemonSet's image leaves out: a tool's module is imported only when
its command runs (or for the overview of --help), so the daemon's commands never load one, and a
tool whose extra is missing says which extra to install.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from exporter import __version__
from exporter.app import Exporter
from exporter.collector_gc import settle_after_start_up
from exporter.config import ConfigError, build, load_file, parse_engine_flag, parse_gateway_flag
from exporter.exposition import RenderedSnapshot, render_text
from exporter.profile.command import add_arguments as add_profile_arguments
from exporter.profile.command import run as run_profile
from exporter.server import ExporterHTTPServer
from exporter.settings import Config
from exporter.sources.engines import MAPPINGS as ENGINES
from exporter.sources.gateways import MAPPINGS as GATEWAYS
from exporter.sources.gpu import GPU_MODES
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
        help=f"engine metrics URL, repeatable; TYPE is {ENGINES.listing()} "
        "(detected from the metric names when omitted); replaces engines from the file",
    )
    parser.add_argument(
        "--gateway",
        action="append",
        metavar="[TYPE=]URL",
        help=f"gateway metrics URL, repeatable; TYPE is {GATEWAYS.listing()} "
        "(detected from the metric names when omitted); replaces gateways from the file",
    )
    parser.add_argument(
        "--gpu",
        metavar="MODE",
        help=f"{GPU_MODES.listing(lambda name: GPU_MODES[name].usage)} (default {_DEFAULTS.gpu.mode})",
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


@dataclass(frozen=True)
class ToolCommand:
    """What a tool's module gives the command line."""

    add_parser: Callable[[Callable[..., argparse.ArgumentParser]], None]  # given `commands.add_parser`
    run: Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Tool:
    """A command shipped beside the daemon: the extra that carries its libraries, and its module,
    imported by `load` when the command is chosen."""

    extra: str
    load: Callable[[], ToolCommand]


def _generate() -> ToolCommand:
    from exporter.generate import add_generate_parser, run_command

    return ToolCommand(add_generate_parser, run_command)


def _simulate() -> ToolCommand:
    from exporter.simulate.cli import add_simulate_parser, run_command

    return ToolCommand(add_simulate_parser, run_command)


def _demo() -> ToolCommand:
    from exporter.simulate.cli import add_demo_parser, run_command

    return ToolCommand(add_demo_parser, run_command)


def _report() -> ToolCommand:
    from exporter.report.cli import ReportError, add_report_parser, run_report

    def run(args: argparse.Namespace) -> int:
        try:
            return run_report(args)
        except ReportError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return ToolCommand(add_report_parser, run)


TOOLS: dict[str, Tool] = {
    "generate": Tool("generate", _generate),
    "simulate": Tool("demo", _simulate),
    "demo": Tool("demo", _demo),
    "report": Tool("report", _report),
}


def _command_of(argv: Sequence[str]) -> str | None:
    """The command argv names: its first word that is not an option (the top level has only
    --help and --version, which take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def _install_hint(extra: str) -> str:
    return f"pip install '{PROG}[{extra}]'"


def _outside_library(exc: ModuleNotFoundError) -> str | None:
    """The missing library's top-level name, or None when the missing module is the exporter's own
    (a bug, not an install without an extra)."""
    top = (exc.name or "").partition(".")[0]
    return top if top and top != "exporter" else None


# A value may start with `-` and a digit (`report --baseline -2h/-1h`): argparse reads such a token
# as an option unless it is a plain negative number, so it is joined to the option before it
# (`--baseline=-2h/-1h`, argparse's own spelling). No option here starts with a digit.
_DASH_DIGIT = re.compile(r"-\d")


def _join_dash_values(argv: Sequence[str]) -> list[str]:
    joined: list[str] = []
    for arg in argv:
        after_option = joined and joined[-1].startswith("--") and "=" not in joined[-1] and "--" not in joined
        if after_option and _DASH_DIGIT.match(arg):
            joined[-1] += "=" + arg
        else:
            joined.append(arg)
    return joined


def make_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser for `argv`: a tool's arguments only when argv names it or no command at all."""
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
    add_profile_arguments(commands.add_parser("profile", help="take one bounded profile through an engine's endpoint"))
    chosen = _command_of(argv)
    for name, tool in TOOLS.items():
        if chosen not in (name, None):
            commands.add_parser(name)  # listed in the usage line; its arguments matter only when chosen
            continue
        try:
            tool.load().add_parser(commands.add_parser)
        except ModuleNotFoundError as exc:
            if chosen == name or _outside_library(exc) is None:
                raise
            commands.add_parser(name, help=f"needs the {tool.extra} extra: {_install_hint(tool.extra)}")
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
    settle_after_start_up()
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
    argv = _join_dash_values(sys.argv[1:] if argv is None else argv)
    try:
        args = make_parser(argv).parse_args(argv)
        if args.command in TOOLS:
            return TOOLS[args.command].load().run(args)
        if args.command == "profile":
            return run_profile(args)
        if args.command == "check-config":
            config = build(load_file(args.file))
            print(f"{args.file}: ok ({len(config.engines)} engine target(s))")
            return 0
        config = config_from_args(args)
        _setup_logging(config.log_level)
        if args.command == "once":
            return run_once(config, args.format)
        return run_serve(config, lambda: config_from_args(args))
    except ConfigError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        library, command = _outside_library(exc), _command_of(argv)
        if library is None or command not in TOOLS:
            raise
        extra = TOOLS[command].extra
        print(
            f"{PROG}: error: {command} needs {library}, which comes with the {extra} extra: {_install_hint(extra)}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
