"""Disaggregated serving's rules: the hand-over per model and role, the TTFT parts, the pools' balance.

Recording rules (`level:metric:operations`) turn the exporter's `llm_kv_transfer_*` and
`llm_pd_ttft_part_seconds` series into per-model, per-role figures the dashboards and the case
review read; the alerts page on what the stage alert (LLMKVTransferBound, from the record) does
not cover: hand-overs that fail or expire, and a pool that starves the other.
"""

from __future__ import annotations

from exporter.monitoring.alert_builder import AlertBuilder, AlertingRule
from exporter.monitoring.config import MonitoringConfig
from exporter.monitoring.promql import series
from exporter.monitoring.records import RecordingRule
from exporter.stages.record import Fmt


class PdRecordNames:
    """The recorded series' names for a configuration (the rate window is part of some)."""

    def __init__(self, config: MonitoringConfig) -> None:
        w = config.rate_interval
        self.bytes_rate = f"model_role:llm_kv_transfer_bytes:sum_rate{w}"
        self.seconds_mean = f"model_role:llm_kv_transfer_seconds:mean_rate{w}"
        self.speed = f"model_role:llm_kv_transfer_speed_bytes_per_second:rate{w}"
        self.failures_rate = f"model_role:llm_kv_transfer_failures:sum_rate{w}"
        self.expired_rate = f"model_role:llm_kv_transfer_expired:sum_rate{w}"
        self.pending = "model_role:llm_kv_transfer_pending_requests:sum"
        self.ttft_parts = "model_part:llm_pd_ttft_part_seconds:avg"
        self.pool_waiting = "model_role:llm_engine_requests_waiting:avg"
        self.pool_kv = "model_role:llm_engine_kv_cache_usage_ratio:avg"


def pd_recording_rules(config: MonitoringConfig) -> list[RecordingRule]:
    names = PdRecordNames(config)
    x, w, cluster = config.selectors.exporter, config.rate_interval, config.labels.cluster
    by_role = f"{cluster}, model, role, connector"

    def rate(family: str) -> str:
        return f"rate({series(family, x)}[{w}])"

    pooled = 'role=~"prefill|decode"'
    return [
        RecordingRule(names.bytes_rate, f"sum by ({by_role}) ({rate('llm_kv_transfer_bytes_total')})"),
        RecordingRule(
            names.seconds_mean,
            f"sum by ({by_role}) ({rate('llm_kv_transfer_seconds_sum')})\n/\n"
            f"(sum by ({by_role}) ({rate('llm_kv_transfer_seconds_count')}) > 0)",
        ),
        RecordingRule(
            names.speed,
            f"sum by ({by_role}) ({rate('llm_kv_transfer_bytes_total')})\n/\n"
            f"(sum by ({by_role}) ({rate('llm_kv_transfer_seconds_sum')}) > 0)",
        ),
        RecordingRule(names.failures_rate, f"sum by ({by_role}, kind) ({rate('llm_kv_transfer_failures_total')})"),
        RecordingRule(names.expired_rate, f"sum by ({by_role}) ({rate('llm_kv_transfer_expired_total')})"),
        RecordingRule(
            names.pending, f"sum by ({cluster}, model, role, side) ({series('llm_kv_transfer_pending_requests', x)})"
        ),
        RecordingRule(names.ttft_parts, f"avg by ({cluster}, model, part) ({series('llm_pd_ttft_part_seconds', x)})"),
        RecordingRule(
            names.pool_waiting, f"avg by ({cluster}, model, role) ({series('llm_engine_requests_waiting', x, pooled)})"
        ),
        RecordingRule(
            names.pool_kv, f"avg by ({cluster}, model, role) ({series('llm_engine_kv_cache_usage_ratio', x, pooled)})"
        ),
    ]


def pd_alerts(b: AlertBuilder) -> list[AlertingRule]:
    t, d, w = b.config.thresholds, b.config.diagnosis, b.config.rate_interval
    names = PdRecordNames(b.config)
    worker = (
        f"{{{{ $labels.role }}}} worker {{{{ $labels.engine }}}} (model {{{{ $labels.model }}}}) "
        f"on {{{{ $labels.{b.node} }}}}"
    )
    connector = "{{ with $labels.connector }} ({{ . }} connector){{ end }}"
    pair_labels = f"{b.cluster}, {b.node}, engine, model, role, connector"
    pool = f"model {{{{ $labels.model }}}}{{{{ with $labels.{b.cluster} }}}} of cluster {{{{ . }}}}{{{{ end }}}}"
    model_labels = (b.cluster, "model")
    decode_kv = b.lookup(f'max({names.pool_kv}{{@, role="decode"}})', model_labels, Fmt.PERCENT, exporter_series=False)
    prefill_wait = b.lookup(
        f'max({names.pool_waiting}{{@, role="prefill"}})', model_labels, Fmt.RATE, exporter_series=False
    )
    return [
        b.alert(
            "LLMKVTransferFailures",
            f"sum by ({pair_labels}, kind) (rate({b.s('llm_kv_transfer_failures_total')}[{w}]))\n"
            f"> {t.kv_transfer_failures_per_second:g}",
            "KV-cache hand-overs between prefill and decode workers fail.",
            f"{worker}{connector} counts {{{{ $value | {Fmt.RATE} }}}} failed {{{{ $labels.kind }}}} transfers/s "
            f"(line {t.kv_transfer_failures_per_second:g}/s): each is a request recomputed or lost.",
        ),
        b.alert(
            "LLMKVTransferExpired",
            f"sum by ({pair_labels}) (increase({b.s('llm_kv_transfer_expired_total')}[{w}])) > 0",
            "Prefilled KV expired before a decode worker read it.",
            f"{worker}{connector} let {{{{ $value | {Fmt.COUNT} }}}} held KV caches expire in {w}: the decode "
            "side did not read them in time (decode too slow or lost), and the prefill work was wasted.",
        ),
        b.alert(
            "LLMPrefillDecodeImbalance",
            f'{names.pool_waiting}{{role="prefill"}} >= {d.waiting_requests:g}\n'
            f'and on ({b.cluster}, model)\n{names.pool_kv}{{role="decode"}} < {d.kv_usage_warning:g}',
            "The prefill pool of a disaggregated model starves its decode pool.",
            f"Prefill workers of {pool} hold {{{{ $value | {Fmt.RATE} }}}} waiting requests each (line "
            f"{d.waiting_requests:g}) while the decode workers' KV cache stands at {decode_kv}: move workers "
            "from decode to prefill, or add prefill workers.",
            limiting="prefill",
        ),
        b.alert(
            "LLMPrefillDecodeImbalance",
            f'{names.pool_kv}{{role="decode"}} >= {d.kv_usage_critical:g}\n'
            f'and on ({b.cluster}, model)\n{names.pool_waiting}{{role="prefill"}} < {d.waiting_requests * 0.5:g}',
            "The decode pool of a disaggregated model holds back its prefill pool.",
            f"Decode workers of {pool} have {{{{ $value | {Fmt.PERCENT} }}}} of their KV cache in use on average "
            f"(line {d.kv_usage_critical:g}) while the prefill workers hold {prefill_wait} waiting requests each: "
            "hand-overs wait for decode slots. Move workers from prefill to decode, or add decode workers.",
            limiting="decode",
        ),
    ]
