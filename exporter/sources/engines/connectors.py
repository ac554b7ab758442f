"""Where one KV connector's figures are in an engine's exposition: the spec an engine mapping
declares (`EngineMapping.kv_connectors`) and exporter/sources/engines/kv_transfer.py reads.

Apart from kv_transfer.py so that the mappings' base class can name the type without importing
the reader, which itself reads through the mappings' registry.
"""

from __future__ import annotations

from dataclasses import dataclass

#: (wire name, label=value it must carry or "") of a counter or gauge
Series = tuple[str, str]


@dataclass(frozen=True)
class Connector:
    """Where one connector's figures are, for one engine's exposition."""

    name: str
    #: histograms of each transfer's time (newest spelling first), in `latency_scale` of a second
    latency: tuple[str, ...] = ()
    latency_scale: float = 1.0
    #: histograms of each transfer's size: `_sum` is the bytes (x `size_scale`), `_count` the transfers
    size: tuple[str, ...] = ()
    size_scale: float = 1.0
    #: counters where there are no histograms (offloading, TENT, LMCache)
    bytes_counters: tuple[Series, ...] = ()
    seconds_counters: tuple[Series, ...] = ()
    transfer_counters: tuple[Series, ...] = ()
    failures: tuple[tuple[str, tuple[Series, ...]], ...] = ()
    expired: tuple[Series, ...] = ()
    retries: tuple[Series, ...] = ()
    #: the engine's own speed histogram (GB/s), read only to say how far it is off
    speed: tuple[str, ...] = ()
    #: a last-value gauge of the last transfer's latency (SGLang before its histograms), in seconds x scale
    last_latency: tuple[Series, ...] = ()
    #: why the latency is not the plain per-transfer wire time, for the evidence
    latency_note: str = ""
