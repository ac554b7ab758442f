"""Disaggregated serving: a model's prefill and decode pools side by side, its time to first token
taken apart, and the KV hand-over between the pools.

The pools are the engines with `role="prefill"` and `role="decode"` (a unified engine carries no
role); the parts of the time to first token are the exporter's means per decode worker
(`llm_pd_ttft_part_seconds`), stacked so the part that grew shows as the band that widened; the
hand-over is read from the connectors' own counters (`llm_kv_transfer_*`), beside the node's RDMA
receive rate: close together, the KV crosses the fabric (docs/metrics.md, "Disaggregated serving").
"""

from __future__ import annotations

from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.dashboards.board import Board, alert_runbook_links, summary
from exporter.monitoring.dashboards.queries import Scope
from exporter.stages.evidence import drawn
from exporter.stages.kv_transfer import SHARE_HIGH, SHARE_LOW
from exporter.stages.kv_transfer import STAGE as KV_TRANSFER
from exporter.stages.panels import Line, Query, Unit, ratio, timeseries

UID = "llm-disaggregated"
TITLE = "LLM serving / Disaggregated serving"
VARIABLES = ("datasource", "cluster", "namespace", "node", "model")
ROLES = ("prefill", "decode")
#: the alerts that page on what this board shows (exporter/monitoring/pd_rules.py, the kv_transfer stage's)
IMBALANCE = "LLMPrefillDecodeImbalance"
HAND_OVER_LOST = ("LLMKVTransferFailures", "LLMKVTransferExpired")


def board(config: MonitoringConfig) -> Board:
    s = Scope(config, VARIABLES)
    b = Board(config, UID, TITLE, summary(__doc__), VARIABLES)
    by_role = "by (model, role)"
    failure_line = Line(
        config.thresholds.kv_transfer_failures_per_second, "red", "thresholds.kv_transfer_failures_per_second"
    )

    pools, p95 = 'role=~"prefill|decode"', 'quantile="0.95"'
    balance = alert_runbook_links(config, IMBALANCE)
    transfer_bound = alert_runbook_links(config, *(alert.name for alert in KV_TRANSFER.alerts))
    transfer_parts = 'part=~"transfer|transfer_queue"'

    def pooled(op: str, family: str, rate: bool = False) -> str:
        selected = s.rate(family, pools) if rate else s(family, pools)
        return f"{op} {by_role} ({selected})"

    b.row(
        "The pools side by side",
        timeseries(
            "Waiting per worker",
            Query(pooled("avg", "llm_engine_requests_waiting"), "{{model}} {{role}}"),
            unit=Unit.COUNT,
            lines=drawn(s, "llm_engine_requests_waiting"),
            description="A decode worker's count includes the requests parked for their KV (see pending hand-overs).",
            links=balance,
        ),
        timeseries(
            "Running per worker",
            Query(pooled("avg", "llm_engine_requests_running"), "{{model}} {{role}}"),
            unit=Unit.COUNT,
        ),
        ratio(
            "KV cache usage per worker",
            Query(pooled("avg", "llm_engine_kv_cache_usage_ratio"), "{{model}} {{role}}"),
            lines=drawn(s, "llm_engine_kv_cache_usage_ratio"),
            description="A prefill worker holds KV until the decode side has read it: a full prefill pool with idle "
            "compute is decode back-pressure.",
            links=balance,
        ),
        timeseries(
            "Time to first token p95 per pool",
            Query(f"max {by_role} ({s('llm_engine_time_to_first_token_seconds', p95)})", "{{model}} {{role}}"),
            unit=Unit.SECONDS,
            description="Each side's own clock: the prefill leg's, and the decode leg's from the hand-over on.",
        ),
        timeseries(
            "Prompt and generated tokens/s per pool",
            Query(pooled("sum", "llm_engine_prompt_tokens_total", rate=True), "{{model}} {{role}} prompt"),
            Query(pooled("sum", "llm_engine_generation_tokens_total", rate=True), "{{model}} {{role}} generated"),
            unit=Unit.TOKENS_PER_SECOND,
        ),
        timeseries(
            "Workers per pool",
            Query(f"count {by_role} ({s('llm_engine_up', pools)} == 1)", "{{model}} {{role}}"),
            unit=Unit.COUNT,
            description="The P:D ratio the balance is read against (LLMPrefillDecodeImbalance).",
            links=balance,
        ),
    )
    b.row(
        "Time to first token taken apart",
        timeseries(
            "Mean TTFT parts (decode workers)",
            Query(f"avg by (model, part) ({s('llm_pd_ttft_part_seconds')})", "{{model}} {{part}}"),
            unit=Unit.SECONDS,
            stack=True,
            width=16,
            description="gateway queue, prefill queue, prefill compute, decode admission, transfer queue, transfer, "
            "first decode step, and what a measured end-to-end TTFT leaves unexplained; a part no component "
            "measures is absent, not 0.",
            links=transfer_bound,
        ),
        timeseries(
            "Transfer share of TTFT",
            Query(
                f"sum by (model) ({s('llm_pd_ttft_part_seconds', transfer_parts)})\n/\n"
                f"(sum by (model) ({s('llm_pd_ttft_part_seconds')}) > 0)",
                "{{model}}",
            ),
            unit=Unit.RATIO,
            min=0,
            max=1,
            lines=(Line(SHARE_LOW, "orange"), Line(SHARE_HIGH, "red")),
            width=8,
            description="The KV transfer stage ramps from 20 % to 40 % of the time to first token.",
            links=transfer_bound,
        ),
    )
    b.row(
        "The hand-over",
        timeseries(
            "Transfer time p95",
            Query(
                f"max by (model, role, connector) ({s('llm_kv_transfer_seconds', p95)})",
                "{{model}} {{role}} {{connector}}",
            ),
            unit=Unit.SECONDS,
            links=transfer_bound,
        ),
        timeseries(
            "KV moved vs RDMA received",
            Query(f"sum by (model) ({s.rate('llm_kv_transfer_bytes_total')})", "{{model}} KV bytes"),
            Query(f"sum ({s.rate('llm_rdma_port_receive_bytes_total')})", "RDMA receive"),
            unit=Unit.BYTES_PER_SECOND,
            links=transfer_bound,
        ),
        timeseries(
            "Speed while transferring",
            Query(
                f"max by (model, role, connector) ({s('llm_kv_transfer_speed_bytes_per_second')})",
                "{{model}} {{role}} {{connector}}",
            ),
            unit=Unit.BYTES_PER_SECOND,
            description="Bytes over transfer time, recomputed by the exporter (never SGLang's own speed figure).",
            links=transfer_bound,
        ),
        timeseries(
            "Pending hand-overs",
            Query(
                f"sum by (model, side) ({s('llm_kv_transfer_pending_requests')})",
                "{{model}} {{side}}",
            ),
            unit=Unit.COUNT,
            links=transfer_bound,
        ),
        timeseries(
            "Failed and expired hand-overs",
            Query(f"sum by (model, kind) ({s.rate('llm_kv_transfer_failures_total')})", "{{model}} failed {{kind}}"),
            Query(f"sum by (model) ({s.rate('llm_kv_transfer_expired_total')})", "{{model}} expired"),
            unit=Unit.PER_SECOND,
            lines=(failure_line,),
            links=alert_runbook_links(config, *HAND_OVER_LOST),
        ),
    )
    return b
