"""The KV hand-over between prefill and decode workers, read from each engine's connector families.

Every connector measures something else, on another side (shared/research/field-2026.md §1):

- vLLM's NIXL and Mooncake connectors (vllm/distributed/kv_transfer/kv_connector/v1/*/stats.py):
  a histogram of each transfer's duration and of its bytes, observed by the side that drives the
  read (decode); failed transfers on both sides; requests whose held KV expired on the prefill
  side. The offloading connector moves KV between GPU and CPU (loads are what a request waits
  for); LMCache reads from its remote backends. vLLM 0.32 puts requests waiting for remote KV in
  `vllm:num_requests_kv_fetch_by_stage` on a KV consumer (else only in the `deferred` waiting
  reason, which also holds requests over the LoRA budget: it counts as the receiver's pending
  transfers on a decode worker alone, exporter/sources/engine_pd.py), and counts the prompt tokens
  that came by transfer in `prompt_tokens_by_source`.
- SGLang's PD disaggregation: per request, at the sender (prefill), the transfer's latency (ms),
  speed (GB/s) and size (MB): histograms since 2026-02, last-value gauges before; its queues; and
  `per_stage_req_latency_seconds{stage}`. Its speed is overstated (bytes of every chunk over the
  last chunk's latency, SGLang PR #31993) and so is its latency short: the transfer time is read
  from the `prefill_transfer_kv_cache` stage where the engine has it, and speed is never the
  engine's own figure but bytes over transfer time.
- TensorRT-LLM through Dynamo (`trtllm_kv_transfer_*`, lib/runtime/src/metrics/prometheus_names.rs).
- Mooncake's TENT transfer engine (`tent_*`, built with -DTENT_METRICS_ENABLED=ON), where its
  families reach the scraped payload.

A family an engine does not export stays None: the source leaves its series out and the
diagnosis says that part of the hand-over is unmeasured, never zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from exporter.model import Histogram
from exporter.promtext import LabelKey, ParsedSamples
from exporter.sources.engines.common import (
    counter_spellings,
    first_present,
    read_histograms,
    reduce_by_model,
    spellings,
)
from exporter.sources.engines.connectors import Connector, Series
from exporter.sources.engines.registry import MAPPINGS


@dataclass(slots=True)
class KvTransferReading:
    """One connector's hand-over figures for one model, cumulative where they are counters."""

    connector: str
    latency: Histogram | None = None
    latency_note: str = ""
    bytes_total: float | None = None
    transfers_total: float | None = None
    #: transfer time summed over transfers (the latency histogram's `_sum`, or a time counter)
    seconds_total: float | None = None
    failures: dict[str, float] = field(default_factory=dict)
    expired_total: float | None = None
    retries_total: float | None = None
    #: requests between the pools now, by side ("sender", "receiver")
    pending: dict[str, float] = field(default_factory=dict)
    #: prompt tokens that arrived by transfer (vLLM's `external_kv_transfer` source)
    received_tokens_total: float | None = None
    #: the engine's own speed histogram, bytes per second (the figure not to trust)
    engine_speed: Histogram | None = None
    last_latency_seconds: float | None = None


@lru_cache(maxsize=64)
def connector_names(connector: Connector) -> frozenset[str]:
    """Every sample name a connector's figures are read from (remembered: the connectors are fixed)."""
    found: set[str] = set()
    for base in (*connector.latency, *connector.size, *connector.speed):
        found.update((base + "_bucket", base + "_sum", base + "_count"))
    counters = (
        *connector.bytes_counters,
        *connector.seconds_counters,
        *connector.transfer_counters,
        *connector.expired,
        *connector.retries,
        *connector.last_latency,
        *(s for _, series in connector.failures for s in series),
    )
    found.update(counter_spellings(tuple(name for name, _ in counters)))
    return frozenset(found)


def _sglang(*names: str) -> tuple[str, ...]:
    """SGLang's families under both its prefixes (engines/common.py `spellings`)."""
    return tuple(spelling for name in names for spelling in spellings(name, "sglang:", "sglang_"))


VLLM_CONNECTORS = (
    Connector(
        "nixl",
        latency=("vllm:nixl_xfer_time_seconds",),
        size=("vllm:nixl_bytes_transferred",),
        failures=(("transfer", (("vllm:nixl_num_failed_transfers_total", ""),)),),
        expired=(("vllm:nixl_num_kv_expired_reqs_total", ""),),
    ),
    Connector(
        "mooncake",
        latency=("vllm:mooncake_xfer_time_seconds",),
        size=("vllm:mooncake_bytes_transferred",),
        failures=(
            ("transfer", (("vllm:mooncake_num_failed_transfers_total", ""),)),
            ("receive", (("vllm:mooncake_num_failed_recvs_total", ""),)),
        ),
        expired=(("vllm:mooncake_num_kv_expired_reqs_total", ""),),
    ),
    Connector(
        "offloading",
        size=("vllm:kv_offload_load_size",),
        bytes_counters=(
            ("vllm:kv_offload_load_bytes_total", ""),
            ("vllm:kv_offload_total_bytes_total", "transfer_type=CPU_to_GPU"),
        ),
        seconds_counters=(
            ("vllm:kv_offload_load_time_total", ""),
            ("vllm:kv_offload_total_time_total", "transfer_type=CPU_to_GPU"),
        ),
        latency_note="CPU to GPU loads of the offloading connector",
    ),
    Connector(
        "lmcache",
        latency=("lmcache:remote_time_to_get",),
        latency_scale=0.001,
        bytes_counters=(("lmcache:num_remote_read_bytes_total", ""),),
        transfer_counters=(("lmcache:num_remote_read_requests_total", ""),),
        failures=(("transfer", (("lmcache:remote_ping_errors_total", ""),)),),
        latency_note="LMCache reads from its remote backend",
    ),
    Connector(
        "tent",
        latency=("tent_read_latency_us",),
        latency_scale=1e-6,
        bytes_counters=(("tent_read_bytes_total", ""),),
        transfer_counters=(("tent_read_requests_total", ""),),
        failures=(("transfer", (("tent_read_failures_total", ""),)),),
        expired=(("tent_deadline_infeasible_total", ""),),
    ),
)
SGLANG_TRANSFER_STAGE = "prefill_transfer_kv_cache"
SGLANG_CONNECTOR = Connector(
    "sglang",
    latency=_sglang("kv_transfer_latency_ms"),
    latency_scale=0.001,
    size=_sglang("kv_transfer_total_mb"),
    size_scale=1e6,
    failures=(
        ("transfer", tuple((n, "") for n in _sglang("num_transfer_failed_reqs_total"))),
        ("bootstrap", tuple((n, "") for n in _sglang("num_bootstrap_failed_reqs_total"))),
    ),
    retries=tuple((n, "") for n in _sglang("num_prefill_retries_total")),
    speed=_sglang("kv_transfer_speed_gb_s"),
    last_latency=tuple((n, "") for n in _sglang("kv_transfer_latency_ms")),
)
TRTLLM_CONNECTOR = Connector(
    "trtllm",
    latency=("trtllm_kv_transfer_latency_seconds",),
    size=("trtllm_kv_transfer_bytes",),
    transfer_counters=(("trtllm_kv_transfer_success_total", ""),),
    speed=("trtllm_kv_transfer_speed_gb_s",),
)
FETCH_BY_STAGE = "vllm:num_requests_kv_fetch_by_stage"
PROMPT_BY_SOURCE = "vllm:prompt_tokens_by_source_total"
SGLANG_STAGES = _sglang("per_stage_req_latency_seconds")
SGLANG_PENDING = {
    "sender": _sglang("num_prefill_inflight_queue_reqs"),
    "receiver": _sglang("num_decode_transfer_queue_reqs"),
}
#: what the pending gauges and received tokens read, per engine
ENGINE_NAMES: Mapping[str, frozenset[str]] = {
    "vllm": frozenset({FETCH_BY_STAGE, *counter_spellings((PROMPT_BY_SOURCE,))}),
    "sglang": frozenset(
        {*(b + s for b in SGLANG_STAGES for s in ("_bucket", "_sum", "_count")), *SGLANG_PENDING["sender"]}
        | set(SGLANG_PENDING["receiver"])
    ),
}


def connectors(engine_type: str) -> tuple[Connector, ...]:
    """The connectors an engine type's mapping declares (`EngineMapping.kv_connectors`)."""
    mapping = MAPPINGS.get(engine_type)
    return () if mapping is None else mapping.kv_connectors


def wanted(engine_type: str) -> frozenset[str]:
    """Every sample name the hand-over of this engine type is read from."""
    names: set[str] = set(ENGINE_NAMES.get(engine_type, ()))
    for connector in connectors(engine_type):
        names |= connector_names(connector)
    return frozenset(names)


def read(
    engine_type: str, parsed: ParsedSamples, duplicate_labels: frozenset[str]
) -> dict[str, list[KvTransferReading]]:
    """Per model, one reading per connector the exposition has figures of (none: no hand-over seen)."""
    found: dict[str, list[KvTransferReading]] = {}
    for connector in connectors(engine_type):
        if not any(parsed.get(name) for name in connector_names(connector)):
            continue  # a unified engine, or another connector: none of its families has series
        for model, reading in _connector(connector, parsed, duplicate_labels).items():
            found.setdefault(model, []).append(reading)
    if engine_type == "sglang":
        _sglang_stage_latency(parsed, duplicate_labels, found)
    pending = _pending(engine_type, parsed, duplicate_labels)
    received = reduce_by_model(_first_matching(parsed, PROMPT_BY_SOURCE, "source=external_kv_transfer"), "sum")
    for model in set(pending) | set(received):
        readings = found.setdefault(model, [])
        if not readings:  # a connector without families of its own (vLLM's ExampleConnector)
            readings.append(KvTransferReading(""))
        readings[0].pending = pending.get(model, {})
        readings[0].received_tokens_total = received.get(model)
    return found


def _connector(
    connector: Connector, parsed: ParsedSamples, duplicate_labels: frozenset[str]
) -> dict[str, KvTransferReading]:
    readings: dict[str, KvTransferReading] = {}

    def reading(model: str) -> KvTransferReading:
        return readings.setdefault(model, KvTransferReading(connector.name, latency_note=connector.latency_note))

    for model, histogram in read_histograms(
        parsed, connector.latency, connector.latency_scale, duplicate_labels
    ).items():
        reading(model).latency = histogram
        reading(model).seconds_total = histogram.sum
        reading(model).transfers_total = histogram.count
    for model, histogram in read_histograms(parsed, connector.size, connector.size_scale, duplicate_labels).items():
        reading(model).bytes_total = histogram.sum
        reading(model).transfers_total = histogram.count
    for attr, series in (
        ("bytes_total", connector.bytes_counters),
        ("seconds_total", connector.seconds_counters),
        ("transfers_total", connector.transfer_counters),
        ("expired_total", connector.expired),
        ("retries_total", connector.retries),
    ):
        for model, value in _first(parsed, series, duplicate_labels).items():
            if getattr(reading(model), attr) is None:
                setattr(reading(model), attr, value)
    for kind, series in connector.failures:
        for model, value in _first(parsed, series, duplicate_labels).items():
            reading(model).failures[kind] = value
    for model, histogram in read_histograms(parsed, connector.speed, 1e9, duplicate_labels).items():
        reading(model).engine_speed = histogram
    if not any(parsed.get(base + "_bucket") for base in connector.latency):
        for model, value in _first(parsed, connector.last_latency, duplicate_labels).items():
            reading(model).last_latency_seconds = value * connector.latency_scale
    return readings


def _sglang_stage_latency(
    parsed: ParsedSamples, duplicate_labels: frozenset[str], found: dict[str, list[KvTransferReading]]
) -> None:
    """The sender's whole transfer time (queue and wire) from SGLang's per-stage histogram, in
    place of its transfer latency, which covers only the last chunk."""
    for base in SGLANG_STAGES:
        selected = {
            suffix: _matching(parsed, base + suffix, f"stage={SGLANG_TRANSFER_STAGE}")
            for suffix in ("_bucket", "_sum", "_count")
        }
        if not selected["_bucket"]:
            continue
        stage_only = {base + suffix: series for suffix, series in selected.items()}
        for model, histogram in read_histograms(stage_only, (base,), 1.0, duplicate_labels | {"stage"}).items():
            if histogram.count <= 0:
                continue
            readings = found.setdefault(model, [])
            if not readings:
                readings.append(KvTransferReading(SGLANG_CONNECTOR.name))
            target = readings[0]
            target.latency = histogram
            target.seconds_total = histogram.sum
            target.latency_note = (
                f"the prefill side's {SGLANG_TRANSFER_STAGE} stage (queue and wire), not SGLang's "
                "kv_transfer_latency_ms, which covers only the last chunk"
            )
        return


def _pending(engine_type: str, parsed: ParsedSamples, duplicate_labels: frozenset[str]) -> dict[str, dict[str, float]]:
    pending: dict[str, dict[str, float]] = {}
    if engine_type == "vllm":
        for stage in ("stage=waiting_to_start", "stage=in_progress"):
            for model, value in reduce_by_model(_matching(parsed, FETCH_BY_STAGE, stage), "sum").items():
                receiving = pending.setdefault(model, {})
                receiving["receiver"] = receiving.get("receiver", 0.0) + value
    elif engine_type == "sglang":
        for side, names in SGLANG_PENDING.items():
            for model, value in reduce_by_model(first_present(parsed, names), "sum", duplicate_labels).items():
                pending.setdefault(model, {})[side] = value
    return pending


def _matching(parsed: ParsedSamples, name: str, match: str) -> dict[LabelKey, float]:
    """The series of `name` whose label `k` is `v` (`match` "k=v", or "" for every series)."""
    series = parsed.get(name) or {}
    if not match:
        return dict(series)
    key, _, value = match.partition("=")
    return {labels: v for labels, v in series.items() if dict(labels).get(key) == value}


def _first_matching(parsed: ParsedSamples, name: str, match: str) -> dict[LabelKey, float]:
    """`_matching` of a counter under its `_total` spelling, else its bare one (engines/common.py)."""
    for spelling in counter_spellings((name,)):
        selected = _matching(parsed, spelling, match)
        if selected:
            return selected
    return {}


def _first(parsed: ParsedSamples, series: tuple[Series, ...], duplicate_labels: frozenset[str]) -> dict[str, float]:
    """Per model, the first of `series` present (the newest spelling; a counter also bare), summed
    over ranks."""
    for name, match in series:
        selected = _first_matching(parsed, name, match)
        if selected:
            return reduce_by_model(selected, "sum", duplicate_labels)
    return {}
