"""A gateway's histograms cut into slices (tenant, adapter, priority class: exporter/slicing.py).

Gateways know who asked: LiteLLM labels its latency histograms with the team and key alias, the
EPP with the objective, its target model and the priority. Each slice's histogram is the gateway's
own rule applied to that slice's series (`merged_histogram`: one bucket layout, +Inf present), so
the slices add up to the whole. Folding to the target's bound and the windows are the engine
source's (exporter/sources/engine_slices.py).
"""

from __future__ import annotations

from exporter.promtext import ParsedSamples
from exporter.settings import ScrapeLimits
from exporter.sources.engines.slices import sliced_series
from exporter.sources.gateways.common import GatewayMapping, GatewayReading, merged_histogram


def read_gateway_slices(
    mapping: GatewayMapping, parsed: ParsedSamples, limits: ScrapeLimits, reading: GatewayReading
) -> None:
    if limits.max_slices_per_dimension <= 0:
        return
    for key, names in mapping.sliced_histograms:
        base = next((name for name in names if parsed.get(name + "_bucket")), None)
        if base is None:
            continue
        for slice_key, sliced in sliced_series(parsed, base, limits).items():
            histogram = merged_histogram(sliced, (base,))
            if histogram is not None:
                reading.slice_histograms.setdefault(slice_key, {})[key] = histogram
