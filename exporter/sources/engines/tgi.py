"""Hugging Face TGI: `tgi_` families from the Rust `metrics` crate.

TGI has no model label (the model comes from the configuration or its `/info` endpoint), no KV-cache
usage, no TTFT and no preemption metric: those stay absent rather than approximated. Its counters
carry no `_total`; token counts are the sums of its input/generated length histograms, and its
inter-token signal is the per-request mean time per token.
"""

from __future__ import annotations

from exporter.sources.engines.common import DeclarativeMapping, HistogramSignal, Signal, has_prefix
from exporter.sources.engines.registry import MAPPINGS


class TgiMapping(DeclarativeMapping):
    engine_type = "tgi"
    needs_model_from_info = True
    signals = (
        Signal("requests_running", ("tgi_batch_current_size",)),
        Signal("requests_waiting", ("tgi_queue_size",)),
        Signal("prompt_tokens_total", ("tgi_request_input_length_sum",)),
        Signal("generation_tokens_total", ("tgi_request_generated_tokens_sum",)),
    )
    histograms = (
        HistogramSignal("inter_token_latency", ("tgi_request_mean_time_per_token_duration",)),
        HistogramSignal("e2e_request_latency", ("tgi_request_duration",)),
        HistogramSignal("queue_time", ("tgi_request_queue_duration",)),
    )

    def matches(self, names: set[str]) -> bool:
        return has_prefix(names, "tgi_")


MAPPINGS.register(TgiMapping(), order=40)
