"""SGLang: `sglang:` (and gateway-renamed `sglang_`) families.

Scheduler gauges carry `tp_rank`/`pp_rank` (and `moe_ep_rank`, `pid` on some): tensor- and
pipeline-parallel ranks repeat one scheduler's state, so each `dp_rank` counts once. The first
release labelled the model `name=`, later ones `model_name=`. The `cache_hit_rate` gauge is only the
last prefill batch's rate (the decode logger resets it to 0), so the hit ratio comes from the
cached/prompt token counters instead.
"""

from __future__ import annotations

from exporter.sources.engines.common import DeclarativeMapping, HistogramSignal, Signal, has_prefix
from exporter.sources.engines.registry import MAPPINGS


def _both(name: str) -> tuple[str, ...]:
    return ("sglang:" + name, "sglang_" + name)


class SglangMapping(DeclarativeMapping):
    engine_type = "sglang"
    duplicate_labels = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "pid"})
    signals = (
        Signal("requests_running", _both("num_running_reqs")),
        Signal("requests_waiting", _both("num_queue_reqs")),
        Signal("kv_cache_usage_ratio", _both("token_usage"), reduce="max"),
        Signal("preemptions_total", _both("num_retracted_requests_total")),
        Signal("prompt_tokens_total", _both("prompt_tokens_total")),
        Signal("generation_tokens_total", _both("generation_tokens_total")),
        Signal("prefix_cache_hits_total", _both("cached_tokens_total")),
        Signal("prefix_cache_queries_total", _both("prompt_tokens_total")),
    )
    histograms = (
        HistogramSignal("time_to_first_token", _both("time_to_first_token_seconds")),
        HistogramSignal(
            "inter_token_latency",
            _both("inter_token_latency_seconds") + _both("time_per_output_token_seconds"),
        ),
        HistogramSignal("e2e_request_latency", _both("e2e_request_latency_seconds")),
        HistogramSignal("queue_time", _both("queue_time_seconds")),
    )

    def matches(self, names: set[str]) -> bool:
        return has_prefix(names, "sglang:", "sglang_")


MAPPINGS.register(SglangMapping(), order=30)
