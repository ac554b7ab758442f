"""The per-phase report of test_vllm_exporter.py: the values observed (waiting, KV usage,
preemptions, TTFT from the exporter and from the client), as JSON and Markdown under
.cache/test-reports/ and in pytest's terminal summary, so they can be quoted."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class ReportPrinter:
    """Prints the phase report at the end of the run (visible with or without -s)."""

    def __init__(self, markdown: list[str]) -> None:
        self.markdown = markdown

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.markdown:
            terminalreporter.section("vLLM exporter: observed values per phase")
            for line in self.markdown:
                terminalreporter.write_line(line)


def _json_default(value: object) -> object:
    return str(value)


def _fmt(value: object, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.{digits}g}"
    return str(value)


def render_markdown(document: dict[str, Any]) -> list[str]:
    lines = [
        f"vLLM {document['vllm']} on CPU, exporter --interval {document['exporter_interval_s']:g} "
        f"--window {document['exporter_window_s']:g} ({document['module_seconds']} s for the module)",
        "",
        "| phase | waiting (max) | KV usage (max) | preemptions (start -> end) | TTFT p50 exporter / client (s) "
        "| TTFT p99 exporter / client (s) | requests (errors) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, p in document["phases"].items():
        if "waiting_max" not in p and "exporter_ttft_p50_s" not in p:
            continue
        lines.append(
            f"| {name} | {_fmt(p.get('waiting_max'))} | {_fmt(p.get('kv_usage_max'))} "
            f"| {_fmt(p.get('preemptions_start'))} -> {_fmt(p.get('preemptions_end'))} "
            f"| {_fmt(p.get('exporter_ttft_p50_s'))} / {_fmt(p.get('client_ttft_p50_s'))} "
            f"| {_fmt(p.get('exporter_ttft_p99_s'))} / {_fmt(p.get('client_ttft_p99_s'))} "
            f"| {_fmt(p.get('requests'))} ({_fmt(p.get('errors'))}) |"
        )
    lines.append("")
    for name, p in document["phases"].items():
        extras = {k: v for k, v in p.items() if k in _NOTE_KEYS}
        if extras:
            lines.append(f"- {name}: " + ", ".join(f"{k} {_fmt(v, 4)}" for k, v in extras.items()))
    return lines


_NOTE_KEYS = (
    "primary",
    "evidence",
    "primary_sequence",
    "seconds_until_none",
    "prefix_cache_hit_ratio",
    "engine_hits_over_queries",
    "seconds_until_load_seen",
    "views_running_before_kill",
    "requests_failed_by_the_kill",
    "seconds_until_up_0",
    "rounds_up_after_kill",
    "metrics_served_while_down",
    "restart_seconds",
    "seconds_until_quantiles",
    "negative_values",
    "sustained_seconds",
    "client_over_exporter_p50",
    "ttft_compared_at_s",
    "waiting_seen_s",
    "mean_waiting_by_queue_time",
    "queue_time_span_s",
    "kv_usage_quoted_max",
    "views_while_sending",
    "engine_median_bounds_s",
    "engine_reference",
    "engine_median_bucket_s",
    "preemptions_before_kill",
)


def write_report(document: dict[str, Any], json_path: Path, markdown_path: Path) -> list[str]:
    """Write the document as JSON and Markdown; return the Markdown lines."""
    markdown = render_markdown(document)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(document, indent=2, default=_json_default) + "\n")
    markdown_path.write_text("\n".join(markdown) + "\n")
    return markdown
