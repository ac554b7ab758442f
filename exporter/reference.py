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
    ("llm_health_", "Node health findings (docs/health.md)"),
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
    lines += ["", *type_reference()]
    lines += [*vendor_reference(), "", *gateway_clocks(), "", *ranks_and_slices(), "", *pd_reference()]
    lines += ["", *rules_reference()]
    return "\n".join(lines) + "\n"


def type_reference() -> list[str]:
    """The values of `engine_type` and `gateway_type`: the types their mapping modules register."""
    from exporter.sources.engines import MAPPINGS as ENGINES
    from exporter.sources.gateways import MAPPINGS as GATEWAYS

    lines = [
        "## Engine and gateway types",
        "",
        "The values of `engine_type` and `gateway_type`, which are also what an engine's or a gateway's `type:`",
        "and the TYPE of `--engine TYPE=URL` / `--gateway TYPE=URL` accept: one mapping module each, registered by",
        "itself. Without a `type:` the type is detected from the metric names, trying the types in the order listed.",
        "",
        "| label | value | mapping (what it reads: the module's docstring) |",
        "|---|---|---|",
    ]
    for label, registry in (("engine_type", ENGINES), ("gateway_type", GATEWAYS)):
        for name, mapping in registry.items():
            path = type(mapping).__module__.replace(".", "/") + ".py"
            lines.append(f"| `{label}` | `{name}` | `{path}` |")
    return lines


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


def ranks_and_slices() -> list[str]:
    """How an engine's ranks and slices become series, and what they cost."""
    return [
        "## Ranks",
        "",
        "An engine with several ranks exports `llm_engine_rank_up{rank}` per rank: vLLM's data-parallel `engine`",
        'label (`rank="engine=1"`), SGLang\'s scheduler ranks (`rank="dp_rank=2,tp_rank=4,pp_rank=0"`; every',
        "tensor-parallel rank appears only with `--enable-metrics-for-all-schedulers`), and each URL of an engine",
        'with `rank_urls` (`rank="url=http://node1:30000/metrics"`). A rank whose series vanish from an answered',
        "scrape, or whose URL stops answering, reads 0 until it comes back or for 15 minutes, and `/diagnosis` lists",
        "it under `ranks_not_reporting`; the engine's figures are then the reporting ranks' (data-parallel ranks",
        "add up, KV usage is the fullest rank's). An engine of one rank exports no per-rank series.",
        "",
        "## Slices (tenant, adapter, priority class)",
        "",
        "Where a source labels its series with a tenant, a LoRA adapter or a priority class (the target's",
        "`slice_labels`, docs/configuration.md), the engine's queue gauges and latency histograms are also read per",
        "slice: `llm_engine_slice_requests_{running,waiting}`, `llm_slo_slice_attainment_ratio` and",
        "`llm_slo_slice_goodput_requests_per_second` per SLO dimension, and `llm_bottleneck_slice_score` for",
        "queueing (the one stage a slice can suffer alone: the others are the engine's, shared). Each dimension keeps",
        "`max_slices_per_dimension` values (default 10), the most active (requests since the engine started, then",
        "the queue; a value kept last round counts double, so the set does not flap); the rest are added into",
        '`slice="other"`, and `llm_engine_slices_folded{slice_by}` says how many were folded (0: none). Totals never',
        'change with slicing: SGLang\'s queue gauges carry their total under `priority=""` and the classes beside',
        "it, and the classes are slices, not added to the total.",
        "",
        "Which sources carry slices: SGLang 0.5.23 (`priority` with `--enable-priority-scheduling` on its queue",
        "gauges and request histograms; the custom labels of `--tokenizer-metrics-allowed-custom-labels`, e.g. a",
        "tenant, on its request histograms); LiteLLM (`team_alias`, `api_key_alias` on its latency histograms);",
        "the EPP (`fairness_id`, `priority`, and its objective `model_name` and `target_model_name` where",
        "`slice_labels` names them). Slices are judged where they are measured (`measured_at`): a gateway's for",
        "the SLOs judged at that gateway as a whole (docs/slo.md: those covering every engine and model behind",
        "it), with `llm_gateway_slices_folded`. vLLM 0.32 labels no series",
        "by adapter or priority (`lora_requests_info` names the running adapters, read as",
        "`llm_engine_lora_adapter_slots`).",
        "",
        "Series per engine (tests/integration/test_cardinality_budget.py): 72 unsliced (budget 86); with 10",
        "tenants, 10 adapters and 3 priority classes kept and one SLO of two dimensions, 112 more (budget 135):",
        "25 slices x 2 dimensions x attainment and goodput, each priority class's queue and queueing score, one",
        "fold count per dimension.",
    ]


if __name__ == "__main__":
    print(metrics_reference(), end="")
