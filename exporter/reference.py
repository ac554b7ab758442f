"""The metrics reference (docs/metrics.md), written from the catalogue so it cannot drift.

`python -m exporter.reference > docs/metrics.md` rewrites it; a unit test fails when the committed
file differs from what the catalogue says.
"""

from __future__ import annotations

from exporter.catalogue import CATALOGUE
from exporter.monitoring.pd_reference import pd_reference
from exporter.sanity import rules_reference
from exporter.vendor_reference import vendor_reference

_SECTIONS = (
    ("llm_engine_", "Inference engines"),
    ("llm_gpu_", "GPUs"),
    ("llm_rdma_", "RDMA ports"),
    ("llm_host_", "Host"),
    ("llm_kv_transfer_", "KV hand-over between prefill and decode workers"),
    ("llm_pd_", "Time to first token taken apart (disaggregated serving)"),
    ("llm_bottleneck_", "Bottleneck diagnosis"),
    ("llm_gateway_", "Gateways (the stages before the engine)"),
    ("llm_probe_", "Active probes (the client-network stage)"),
    ("llm_slo_", "Latency SLOs (docs/slo.md)"),
    ("llm_capacity_", "Capacity headroom (docs/slo.md)"),
    ("llm_request_", "Request mix, from engine request spans (docs/slo.md)"),
    ("llm_otlp_", "OTLP receiver (docs/slo.md)"),
    ("llm_exporter_", "The exporter itself"),
)


def metrics_reference() -> str:
    lines = [
        "# Metrics reference",
        "",
        "Generated from `exporter/catalogue/` by `python -m exporter.reference`; do not edit by hand.",
        "Summaries carry quantiles 0.5, 0.95 and 0.99 over the exporter's window plus cumulative `_count`/`_sum`.",
    ]
    placed: set[str] = set()
    for prefix, title in _SECTIONS:
        specs = [s for name, s in CATALOGUE.items() if name.startswith(prefix)]
        if not specs:
            continue
        lines += ["", f"## {title}", "", "| family | type | labels | meaning |", "|---|---|---|---|"]
        for s in specs:
            placed.add(s.name)
            help_text = s.help.replace("|", "\\|")
            lines.append(f"| `{s.name}` | {s.type} | {', '.join(f'`{label}`' for label in s.labels)} | {help_text} |")
    rest = [s for name, s in CATALOGUE.items() if name not in placed]
    if rest:
        lines += ["", "## Other", "", "| family | type | labels | meaning |", "|---|---|---|---|"]
        for s in rest:
            lines.append(f"| `{s.name}` | {s.type} | {', '.join(f'`{label}`' for label in s.labels)} | {s.help} |")
    lines += [*vendor_reference(), "", *gateway_clocks(), "", *pd_reference()]
    lines += ["", *rules_reference()]
    return "\n".join(lines) + "\n"


def gateway_clocks() -> list[str]:
    """Where each gateway's time-to-first-token clock starts and stops, from its mapping."""
    from exporter.sources.gateways import MAPPINGS

    lines = [
        "## Gateway clocks",
        "",
        "`llm_gateway_time_to_first_token_seconds` is exported only where the gateway measures one; its clock is "
        "the gateway's own. The prober's clock (`llm_probe_*`) starts just before the request is sent and stops at "
        "the first streamed event with a choice (TTFT) or the end of the stream (e2e), as a client sees it.",
        "",
        "| gateway type | time to first token |",
        "|---|---|",
    ]
    for name, mapping in MAPPINGS.items():
        lines.append(f"| `{name}` | {mapping.ttft_clock or 'not measured (no such histogram)'} |")
    return lines


if __name__ == "__main__":
    print(metrics_reference(), end="")
