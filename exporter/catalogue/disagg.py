"""Disaggregated serving: each engine's role, the KV hand-over between prefill and decode, and
the time to first token taken apart (exporter/sources/engines/kv_transfer.py, exporter/diagnosis/pd.py).

One schema for every engine's connector (vLLM's NIXL, Mooncake, offloading and LMCache
connectors, SGLang's PD disaggregation, TensorRT-LLM through Dynamo, Mooncake's TENT engine):
a family an engine does not export is absent, and the diagnosis says that part is unmeasured.
"""

from __future__ import annotations

from exporter.catalogue.spec import ENGINE_SERIES_LABELS, MetricSpec, counter, families, gauge, summary

#: the parts of a disaggregated request's time to first token, in the order they happen
TTFT_PARTS = (
    "gateway_queue",
    "prefill_queue",
    "prefill_compute",
    "decode_admission",
    "transfer_queue",
    "transfer",
    "first_decode_step",
    "unmeasured",
)
ROLES = ("unified", "prefill", "decode", "encode")
ROLE_SOURCES = ("configuration", "kubernetes", "engine_label", "launch_config", "inferred")

PD_FAMILIES: tuple[MetricSpec, ...] = families(
    ENGINE_SERIES_LABELS,
    gauge(
        "llm_engine_role_info",
        "Always 1, for an engine with a disaggregated role (prefill, decode, encode; a unified engine has none): "
        "source says where the role comes from (configuration, kubernetes, engine_label, launch_config, or inferred "
        "from which series move).",
        "source",
    ),
    summary(
        "llm_kv_transfer_seconds",
        "Time one request's KV cache takes on the link between the prefill and the decode worker, as the side that "
        "measures it observes it (vLLM connectors: the decode side's read; SGLang: the prefill side's send); "
        "quantiles over the exporter's window, from the engine's histogram bucket deltas.",
        "connector",
    ),
    counter("llm_kv_transfer_bytes_total", "KV-cache bytes moved by the connector's transfers.", "connector"),
    gauge(
        "llm_kv_transfer_bytes_per_second",
        "KV-cache bytes the connector moved per second over the exporter's window (the load it puts on the link).",
        "connector",
    ),
    gauge(
        "llm_kv_transfer_speed_bytes_per_second",
        "Bytes per second of transfer time over the exporter's window: the rate a transfer achieves while it runs, "
        "recomputed from bytes and transfer time (never the engine's own speed figure, which SGLang overstates).",
        "connector",
    ),
    counter("llm_kv_transfer_transfers_total", "Transfers the connector completed.", "connector"),
    counter(
        "llm_kv_transfer_failures_total",
        "Failed transfers by kind: transfer (including handshakes and notifications), bootstrap, receive.",
        "connector",
        "kind",
    ),
    counter(
        "llm_kv_transfer_expired_total",
        "Hand-overs whose held KV expired before the decode side read it (counted on the prefill side).",
        "connector",
    ),
    counter("llm_kv_transfer_retries_total", "Prefills retried after a failed hand-over (SGLang).", "connector"),
    gauge(
        "llm_kv_transfer_pending_requests",
        "Requests whose KV is between the pools now: on the sender (prefill done, KV held or being sent) or the "
        "receiver (slots allocated, waiting for the KV to arrive).",
        "connector",
        "side",
    ),
    gauge(
        "llm_pd_ttft_part_seconds",
        "A disaggregated request's mean time to first token taken apart, per decode engine and the prefill pool "
        "serving its model: gateway_queue, prefill_queue, prefill_compute, decode_admission, transfer_queue, "
        "transfer, first_decode_step, and unmeasured (what the measured parts leave of the measured totals).",
        "part",
    ),
)
