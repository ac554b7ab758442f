"""`llm-bottleneck-exporter profile --engine NAME [--seconds S]`: one bounded capture through the
engine's own profiling endpoint, its trace summarized, the capture recorded beside its traces
(`captures.jsonl` in the trace directory), printed as text or JSON. Exit 0 with a trace, 1 when the
engine was not launched with profiling on (the message says what to change), 2 on a usage error."""

from __future__ import annotations

import argparse
import json
import sys

from exporter.config import build
from exporter.config_targets import parse_engine_flag
from exporter.profile.capture import MAX_SECONDS, ProfilingOff, record, take
from exporter.settings import EngineTarget
from exporter.validation import ConfigError, load_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", required=True, metavar="NAME", help="a configured engine's name, or [TYPE=]URL")
    parser.add_argument("--config", metavar="FILE", help="the exporter's configuration (its engines)")
    parser.add_argument("--seconds", type=float, default=10.0, help=f"how long to profile (at most {MAX_SECONDS:g})")
    parser.add_argument("--trace-dir", metavar="DIR", help="where the engine writes its traces (else read from it)")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def find_target(args: argparse.Namespace) -> EngineTarget:
    engines = build(load_file(args.config)).engines if args.config else ()
    for target in engines:
        if target.name == args.engine:
            return target
    if "://" in args.engine:
        return build({"engines": [parse_engine_flag(args.engine)]}).engines[0]
    raise ConfigError("--engine", f"no engine named {args.engine!r} in the configuration")


def run(args: argparse.Namespace) -> int:
    target = find_target(args)
    try:
        capture = take(target, args.seconds, args.trace_dir)
    except ProfilingOff as exc:
        print(f"profile: {exc}", file=sys.stderr)
        return 1
    record(capture)
    if args.format == "json":
        print(json.dumps(capture.as_json(), indent=2))
    else:
        print(f"{target.name}: {capture.seconds:g} s profiled, {len(capture.traces)} trace(s) in {capture.directory}")
        print(*(capture.summary.lines() if capture.summary else ["no trace was written"]), sep="\n")
    return 0 if capture.traces else 1
