"""docs/metrics.md's disaggregated-serving part, written from the connectors each engine mapping declares
(`kv_connectors`, exporter/sources/engines/kv_transfer.py) and the roles' table (roles.py), so it cannot
drift from what is read."""

from __future__ import annotations

from exporter.catalogue.disagg import TTFT_PARTS
from exporter.sources.engines import MAPPINGS as ENGINES
from exporter.sources.engines.connectors import Connector
from exporter.sources.engines.roles import ROLE_LABELS, ROLE_WORDS

#: the series one prefill/decode pair may add over two unified engines (test_cardinality_budget.py)
PAIR_SERIES_BUDGET = 60


def _names(connector: Connector) -> dict[str, str]:
    """Normalized family -> the connector's wire names it is read from."""

    def code(*names: str) -> str:
        return ", ".join(f"`{n}`" for n in names) if names else "—"

    series = {
        "llm_kv_transfer_seconds": code(*connector.latency)
        + (f" (x {connector.latency_scale:g})" if connector.latency_scale != 1 else ""),
        "llm_kv_transfer_bytes_total": code(
            *(f"{n}_sum" for n in connector.size), *(n for n, _ in connector.bytes_counters)
        ),
        "llm_kv_transfer_transfers_total": code(
            *(f"{n}_count" for n in (*connector.latency, *connector.size)), *(n for n, _ in connector.transfer_counters)
        ),
        "llm_kv_transfer_failures_total": code(*(n for _, names in connector.failures for n, _ in names)),
        "llm_kv_transfer_expired_total": code(*(n for n, _ in connector.expired)),
        "llm_kv_transfer_retries_total": code(*(n for n, _ in connector.retries)),
    }
    return series


def pd_reference() -> list[str]:
    lines = [
        "## Disaggregated serving",
        "",
        "An engine of a disaggregated deployment carries `role` (`prefill`, `decode`, `encode`) on every series and "
        "one `llm_engine_role_info{source}`; a unified engine carries neither, so a monolithic deployment's series "
        "are what they were. The role comes, in this order, from the engine's configuration (`engines[].role`) or "
        "its pod (`llm-bottleneck-exporter/role` annotation, llm-d's `llm-d.ai/role` label), from the engine's own "
        f"labels ({', '.join(f'`{label}`' for label in ROLE_LABELS)}), from the launch configuration it exports "
        "(vLLM creates `vllm:num_requests_kv_fetch_by_stage` only on a KV consumer), or from which series move "
        '(`source="inferred"`: KV arriving by transfer or reads timed on this side make a decode worker; expiring '
        "or outgoing KV, or one-token requests beside a connector's families, a prefill worker).",
        "",
        "Words the engines and deployments use for a role: "
        + ", ".join(f"`{word}` → {role}" for word, role in ROLE_WORDS.items())
        + ".",
        "",
        "The hand-over is normalized per engine, role and `connector`. A family a connector does not export is "
        "absent, and the diagnosis says that part is unmeasured. Speed is never an engine's own figure "
        "(SGLang's overstates: every chunk's bytes over the last chunk's time): it is bytes over transfer time. "
        "SGLang's transfer time is its sender's `prefill_transfer_kv_cache` stage (queue and wire) where it has "
        "one, its `kv_transfer_latency_ms` (or, before its histograms, that gauge's values as scraped) where not.",
        "",
    ]
    for engine, mapping in ENGINES.items():
        connectors = mapping.kv_connectors
        if not connectors:
            continue
        lines += [f"### {engine}", "", "| family | " + " | ".join(f"`{c.name}`" for c in connectors) + " |"]
        lines.append("|---|" + "---|" * len(connectors))
        tables = [_names(c) for c in connectors]
        for family in tables[0]:
            lines.append(f"| `{family}` | " + " | ".join(table[family] for table in tables) + " |")
        lines.append("")
    lines += [
        "Pending hand-overs (`llm_kv_transfer_pending_requests{side}`): vLLM's receiver side is "
        '`vllm:num_requests_kv_fetch_by_stage{stage=~"waiting_to_start|in_progress"}` on a KV consumer, else its '
        '`num_requests_waiting_by_reason{reason="deferred"}`; SGLang\'s sender side '
        "`num_prefill_inflight_queue_reqs`, its receiver side `num_decode_transfer_queue_reqs`.",
        "",
        "`llm_pd_ttft_part_seconds{part}` takes a decode worker's time to first token apart, as means over the "
        f"diagnosis' level window that add up: {', '.join(f'`{p}`' for p in TTFT_PARTS)}. The prefill parts are "
        "the model's prefill pool on the node (its queue time; its TTFT less it); `first_decode_step` is the "
        "decode worker's TTFT less its queue time; the connector's wire time is `transfer`, and the time from "
        "allocation to arrival (Little's law on the receiver's pending count, bounded by the decode wait) less it "
        "`transfer_queue`; what is left of the decode worker's queue time is `decode_admission`. SGLang times "
        "queue and wire together at the sender: there `transfer` holds both and `transfer_queue` is absent. "
        "`unmeasured` is what a gateway's end-to-end TTFT leaves; without one it is absent and the parts are a "
        "lower bound. `gateway_queue` is a gateway's own queue time where it measures one (the EPP's flow "
        "control). Dynamo's frontend gives the end-to-end TTFT; its router's "
        "`llm_gateway_kv_transfer_estimate_seconds` (the prefill's completion to the first decode token) is an "
        "upper bound that includes decode admission and the first step, so it is only quoted in the evidence, "
        "never used as `transfer`. llm-d's P/D coordinator exports no TTFT (it does not read the decode stream); "
        'its `llm_gateway_step_duration_seconds{step="prefill"}` against the prefill pool\'s TTFT gives the hops.',
        "",
        "**Per model, in the recording rules**: a disaggregated model's requests and answers are counted where "
        'they end (`role!="prefill"`), its prompt tokens where they are computed (`role!="decode"`); its time to '
        "first token, inter-token and end-to-end quantiles (`model_quantile:…:histogram_quantile`) are the larger of "
        "its workers' quantiles, never both pools' buckets summed (a prefill worker's one-token answers would pull "
        "them down; the engines' own histograms carry no role), and for the same reason the per-model buckets of "
        "those three latencies (`model_le:…_bucket:sum_rate5m`, the engine-detail dashboard's heatmaps) leave a "
        "disaggregated model out. Each leg is part of every request, so the figure "
        "is a lower bound that follows the leg that grew; the whole request's is the gateway's "
        '(`measured_at="gateway"`) or the sum of the TTFT parts. SLO attainment counts each request once, on the '
        "decode worker ([slo.md](slo.md)).",
        "",
        f"**Series budget**: a prefill/decode pair adds at most {PAIR_SERIES_BUDGET} series over two unified "
        "engines: the role info, the transfer families per side and the TTFT parts of the decode worker (31 "
        "measured in vLLM's NIXL format, 34 in SGLang's, which has the sender's and receiver's queues besides; "
        "tests/integration/test_cardinality_budget.py). Every engine has the `kv_transfer` stage's score, active "
        "and primary gauges, paired or not.",
    ]
    return lines
