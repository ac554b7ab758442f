"""`report`: the case review over time windows, read from Prometheus.

User errors (a bad window, flag or selector, an unreachable Prometheus, a selector that matches
nothing) print one line and exit 2, as every command of the exporter does.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from exporter.monitoring.config import LabelNames, MonitoringConfig
from exporter.monitoring.promql import parse
from exporter.report.build import NoData, ReadSettings, build_report
from exporter.report.extra import missing_report_extra
from exporter.report.prometheus import PrometheusClient, PrometheusError, PrometheusOptions
from exporter.report.slices import parse_slice
from exporter.report.timing import TooShort
from exporter.report.windows import Window, WindowError, parse_duration, parse_window
from exporter.settings import Config, ScrapeAuth

DEFAULT_SELECTOR = "{" + MonitoringConfig().selectors.exporter + "}"
FORMATS = {".html": "html", ".htm": "html", ".md": "markdown", ".json": "json"}


class ReportError(ValueError):
    """A user error of `report`; its message is the one line shown."""


def add_report_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    # A window such as `--baseline -2h/-1h` reaches argparse as `--baseline=-2h/-1h` (exporter/cli.py).
    p = add_parser("report", help="case review: what changed between time windows, read from Prometheus")
    p.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL (http[s]://host:9090)")
    p.add_argument("--baseline", required=True, metavar="START/END", help="RFC 3339, Unix seconds, now or -DURATION")
    p.add_argument("--incident", required=True, metavar="START/END", help="the window to explain")
    p.add_argument("--after", metavar="START/END", help="after a fix: says whether it worked")
    p.add_argument(
        "--selector",
        default=DEFAULT_SELECTOR,
        metavar="{...}",
        help=f"matchers of the exporter's series (default {DEFAULT_SELECTOR})",
    )
    p.add_argument(
        "--engine-selector",
        default="",
        metavar="{...}",
        help="matchers of engine series scraped directly (histograms, config info)",
    )
    p.add_argument(
        "--slice",
        metavar="DIMENSION=VALUE",
        help="add one slice's rows (tenant=team-a, adapter=sql-lora, priority=1; docs/metrics.md, Slices)",
    )
    p.add_argument("--out", metavar="FILE", help="write here (default stdout); its suffix picks the format")
    p.add_argument("--format", choices=("html", "markdown", "json"), help="default: from --out's suffix, else html")
    p.add_argument(
        "--step",
        metavar="DURATION",
        help="interval of the per-interval values (default: the data's scrape interval, coarser past 250 values)",
    )
    p.add_argument(
        "--rate-interval",
        metavar="DURATION",
        default="auto",
        help="range of every rate() (default auto: the step plus one scrape interval, each rate over its own step)",
    )
    p.add_argument(
        "--exporter-window",
        metavar="DURATION",
        default=f"{Config().window_seconds:g}s",
        help="the exporter's window (its window_seconds), over which it computes quantiles and ratios "
        "(default %(default)s)",
    )
    auth = p.add_argument_group("Prometheus credentials and TLS (as Prometheus' own clients take them)")
    auth.add_argument("--basic-auth-username", metavar="USER")
    auth.add_argument("--basic-auth-password-file", metavar="FILE")
    auth.add_argument("--bearer-token-file", metavar="FILE")
    auth.add_argument("--ca-file", metavar="FILE", help="CA certificates to verify Prometheus' TLS certificate")
    auth.add_argument("--cert-file", metavar="FILE", help="client certificate (mutual TLS)")
    auth.add_argument("--key-file", metavar="FILE", help="the client certificate's key")
    auth.add_argument("--insecure-skip-verify", action="store_true", help="do not verify the certificate")
    auth.add_argument("--timeout", metavar="SECONDS", default="30", help="per request (default %(default)s)")


def _matchers(flag: str, text: str) -> str:
    """The matchers inside `{...}`, checked by the PromQL parser; "" for none."""
    text = text.strip()
    if not text:
        return ""
    if not (text.startswith("{") and text.endswith("}")):
        raise ReportError(f'{flag}: {text!r} is not a selector such as {{model="m",namespace="n"}}')
    try:
        parse("llm_engine_up" + text)
    except ValueError as exc:
        raise ReportError(f"{flag}: {text!r} is not a PromQL selector: {str(exc).splitlines()[0]}") from None
    return text[1:-1].strip()


def _options(args: argparse.Namespace) -> PrometheusOptions:
    url = args.prometheus
    if not url.startswith(("http://", "https://")):
        raise ReportError(f"--prometheus: {url!r} is not an http:// or https:// URL")
    if args.bearer_token_file and args.basic_auth_username:
        raise ReportError("--bearer-token-file and --basic-auth-username exclude each other")
    if args.key_file and not args.cert_file:
        raise ReportError("--key-file needs --cert-file")
    try:
        timeout = float(args.timeout)
    except ValueError:
        raise ReportError(f"--timeout: {args.timeout!r} is not a number of seconds") from None
    if not 0 < timeout <= 600:
        raise ReportError("--timeout: must be above 0 and at most 600 seconds")
    for flag, path in (
        ("--basic-auth-password-file", args.basic_auth_password_file),
        ("--bearer-token-file", args.bearer_token_file),
        ("--ca-file", args.ca_file),
        ("--cert-file", args.cert_file),
        ("--key-file", args.key_file),
    ):
        if path and not Path(path).is_file():
            raise ReportError(f"{flag}: {path} is not a readable file")
    auth = ScrapeAuth(
        username=args.basic_auth_username,
        password_file=args.basic_auth_password_file,
        bearer_token_file=args.bearer_token_file,
    )
    return PrometheusOptions(
        url, auth, args.ca_file, args.cert_file, args.key_file, args.insecure_skip_verify, timeout_seconds=timeout
    )


def windows_of(args: argparse.Namespace, now: float) -> list[Window]:
    windows = [
        parse_window("--baseline", "baseline", args.baseline, now),
        parse_window("--incident", "incident", args.incident, now),
    ]
    if args.after:
        windows.append(parse_window("--after", "after", args.after, now))
    return windows


def require_report_extra() -> None:
    missing = missing_report_extra()
    if missing:
        raise ReportError(missing)


def run_report(args: argparse.Namespace) -> int:
    """Build and write the report; ReportError for any user error (the caller prints it, exits 2)."""
    require_report_extra()
    try:
        windows = windows_of(args, time.time())
        chosen_slice = parse_slice(args.slice) if args.slice else None
    except (WindowError, ValueError) as exc:
        raise ReportError(str(exc)) from None
    settings = ReadSettings(
        step=_duration("--step", args.step) if args.step else None,
        rate_range=_duration("--rate-interval", args.rate_interval) if args.rate_interval != "auto" else None,
        exporter_window=_duration("--exporter-window", args.exporter_window),
        engine_selector=_matchers("--engine-selector", args.engine_selector),
    )
    fmt = args.format or (FORMATS.get(Path(args.out).suffix.lower(), "html") if args.out else "html")
    if args.out and not Path(args.out).resolve().parent.is_dir():
        raise ReportError(f"--out: {Path(args.out).parent} is not a directory")
    selector = _matchers("--selector", args.selector)
    client = PrometheusClient(_options(args))
    try:
        report = build_report(
            client, selector, windows, settings, LabelNames(), plots=fmt != "json", chosen_slice=chosen_slice
        )
    except (PrometheusError, NoData, TooShort) as exc:
        raise ReportError(str(exc)) from None
    finally:
        client.close()
    out = Path(args.out) if args.out else None
    if fmt == "json":
        from exporter.report.render_json import render_json

        _write(out, render_json(report))
    elif fmt == "html":
        from exporter.report.render_pages import render_html

        _write(out, render_html(report))
    else:
        from exporter.report.render_pages import render_markdown

        text, images = render_markdown(report, out)
        for path, svg in images.items():
            path.write_text(svg, encoding="utf-8")
        _write(out, text)
    return 0


def _duration(flag: str, text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise ReportError(f"{flag}: {exc}") from None
    if seconds <= 0:
        raise ReportError(f"{flag}: must be above 0")
    return seconds


def _write(out: Path | None, text: str) -> None:
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        out.write_text(text, encoding="utf-8")
