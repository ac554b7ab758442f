"""The hand-over's families in vLLM's text: the NIXL connector and a KV consumer's fetch stages.

vLLM (0.32.0, both instances launched with `kv_role: kv_both`, as vLLM's NIXL guide does):
`NixlPromMetrics` registers before the perf counters (`vllm:estimated_*`), so its families come
first; `vllm:num_requests_kv_fetch_by_stage` follows `num_requests_waiting_by_reason` on every
KV consumer (kv_both is one). Names, HELP texts, buckets and labels are the connector's
(vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py, vllm/v1/metrics/loggers.py).

SGLang's whole /metrics of a prefill or decode worker: pd_sglang_text.py.
"""

from __future__ import annotations

from typing import Protocol

from exporter.simulate.engine import EngineReplica
from exporter.simulate.pd_engine import DecodeReplica, PrefillReplica
from exporter.simulate.stats import Histogram

Labels = dict[str, str]


class _Writer(Protocol):
    def gauge(self, name: str, help_: str, series: list[tuple[Labels, float]]) -> None: ...
    def counter(self, base: str, help_: str, series: list[tuple[Labels, float]]) -> None: ...
    def histogram(self, name: str, help_: str, labels: Labels, histogram: Histogram) -> None: ...


NIXL_HISTOGRAMS = (
    ("nixl_xfer_time_seconds", "Histogram of transfer duration for NIXL KV Cache transfers."),
    ("nixl_post_time_seconds", "Histogram of transfer post time for NIXL KV Cache transfers."),
    ("nixl_bytes_transferred", "Histogram of bytes transferred per NIXL KV Cache transfers."),
    ("nixl_num_descriptors", "Histogram of number of descriptors per NIXL  KV Cache transfers."),
)
NIXL_COUNTERS = (
    (
        "nixl_num_failed_transfers",
        "Number of failed NIXL KV Cache transfers, including handshake and notification failures. "
        "NOTE: KV expiry is tracked separately in vllm:nixl_num_kv_expired_reqs.",
    ),
    (
        "nixl_num_failed_notifications",
        "Number of failed NIXL KV Cache notifications. Retained for compatibility; these failures are also "
        "included in vllm:nixl_num_failed_transfers.",
    ),
    (
        "nixl_num_kv_expired_reqs",
        "Number of requests that had their KV expire. NOTE: This metric is tracked on the P instance.",
    ),
    (
        "nixl_num_notifications_after_expiry",
        "Number of completion notifications for requests that were no longer tracked, usually because their KV "
        "lease expired. The KV blocks may have been reused before the transfer finished. Counted per notification "
        "(one per remote rank), not per request.",
    ),
)
KV_FETCH_HELP = (
    "Number of waiting requests by async KV load stage. Stage labels: 'waiting_to_start' = needs an async KV load "
    "that has not started; 'in_progress' = load started and not yet reported finished; 'completed_waiting' = load "
    "finished, request not running yet."
)


def deferred_requests(replica: EngineReplica) -> int:
    """Requests parked for their KV (vLLM's `deferred` waiting reason); 0 on a monolithic replica."""
    return replica.deferred if isinstance(replica, DecodeReplica) else 0


def external_prompt_tokens(replica: EngineReplica) -> int:
    """Prompt tokens whose KV came by transfer: every cached token of a decode replica (its requests
    share no prefix cache), none elsewhere."""
    return replica.stats.prompt_tokens_cached if isinstance(replica, DecodeReplica) else 0


def vllm_connector_families(out: _Writer, replica: EngineReplica, base: Labels) -> None:
    """The NIXL connector's families of a prefill or decode replica (nothing on a monolithic one)."""
    if not isinstance(replica, (PrefillReplica, DecodeReplica)):
        return
    pd = replica.pd
    for name, help_ in NIXL_HISTOGRAMS:
        out.histogram("vllm:" + name, help_, base, pd.histograms[name])
    counts = {"nixl_num_failed_transfers": pd.failed, "nixl_num_failed_notifications": 0}
    counts["nixl_num_kv_expired_reqs"] = pd.expired
    for name, help_ in NIXL_COUNTERS:
        out.counter("vllm:" + name, help_, [(base, float(counts.get(name, 0)))])


def kv_fetch_by_stage(out: _Writer, replica: EngineReplica, base: Labels) -> None:
    """`vllm:num_requests_kv_fetch_by_stage`, present on every KV consumer."""
    if isinstance(replica, DecodeReplica):
        stages = replica.transfer_stages()
    elif isinstance(replica, PrefillReplica):
        stages = dict.fromkeys(("waiting_to_start", "in_progress", "completed_waiting"), 0)
    else:
        return
    series = [({**base, "stage": stage}, float(count)) for stage, count in stages.items()]
    out.gauge("vllm:num_requests_kv_fetch_by_stage", KV_FETCH_HELP, series)
