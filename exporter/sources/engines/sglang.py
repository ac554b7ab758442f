"""SGLang: `sglang:` (and gateway-renamed `sglang_`) families.

Scheduler gauges carry `tp_rank`/`pp_rank` (and `moe_ep_rank`, `pid` on some): tensor- and
pipeline-parallel ranks repeat one scheduler's state, so each `dp_rank` counts once. The first
release labelled the model `name=`, later ones `model_name=`. The `cache_hit_rate` gauge is only the
last prefill batch's rate (the decode logger resets it to 0), so the hit ratio comes from the
cached/prompt token counters instead.

As of 0.5.23 (python/sglang/srt/observability/metrics_collector.py):
- with priority scheduling the queue gauges (`num_running_reqs`, `num_queue_reqs`) carry the total
  under `priority=""` and a breakdown per class under `priority="<n>"`: the total is read, the
  classes are slices; the request histograms carry each request's own `priority` (and the custom
  labels of `--tokenizer-metrics-allowed-custom-labels`), so there every series adds to the total;
- hybrid models have one KV pool per attention kind (`full_token_usage`, `swa_token_usage`,
  `mamba_usage`): the cache is as full as its fullest pool, which is what admission runs into;
- `cached_tokens_total{cache_source}`: `device`/`host` are the engine's own tiers, `storage` the
  shared L3 store (another instance's prefill, as a KV connector's would be);
- the MFU counters `estimated_*_per_gpu_total` (`--enable-mfu-metrics`) appear once they count.
Only the first tensor-parallel rank of each data-parallel group exports unless
`--enable-metrics-for-all-schedulers` is set; a node other than the first serves no /metrics of
its own except through the Rust server's per-node listener, so a multi-node SGLang is one engine
with a URL per node (`urls:`, docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from exporter.model import EngineReading
from exporter.promtext import LabelKey, ParsedSamples
from exporter.settings import ScrapeLimits
from exporter.sources.engines.common import (
    DeclarativeMapping,
    HistogramSignal,
    Signal,
    counter_spellings,
    first_present,
    has_prefix,
    reduce_by_model,
    spellings,
)
from exporter.sources.engines.kv_transfer import SGLANG_CONNECTOR
from exporter.sources.engines.registry import MAPPINGS
from exporter.sources.engines.slices import read_engine_slices


def _both(name: str) -> tuple[str, ...]:
    return spellings(name, "sglang:", "sglang_")


#: QueueCount gauges: the total under priority="", a breakdown per priority class beside it
QUEUE_COUNTS = {"requests_running": _both("num_running_reqs"), "requests_waiting": _both("num_queue_reqs")}
#: the KV pools of hybrid models, and the gauges that show a pool exists (a model without one
#: still exports its usage, as 0)
POOLS = {
    "full": (_both("full_token_usage"), _both("kv_used_tokens") + _both("kv_available_tokens")),
    "swa": (_both("swa_token_usage"), _both("swa_used_tokens") + _both("swa_available_tokens")),
    "mamba": (_both("mamba_usage"), _both("mamba_used_tokens") + _both("mamba_available_tokens")),
}
CACHED_TOKENS = _both("cached_tokens_total")
#: logged 0 by every scheduler, 1 or more (the bonus token) once speculative decoding runs
SPEC_ACCEPT_LENGTH = _both("spec_accept_length")
#: cache_source → the normalized source of llm_engine_prompt_tokens_cached_total
CACHED_SOURCES = {"device": "local", "host": "local", "total": "local", "storage": "external"}
LORA_SLOTS = {"lora_slots_used": _both("lora_pool_slots_used"), "lora_slots_total": _both("lora_pool_slots_total")}


def _is_total(key: LabelKey) -> bool:
    return not dict(key).get("priority")


class SglangMapping(DeclarativeMapping):
    engine_type = "sglang"
    kv_connectors = (SGLANG_CONNECTOR,)
    duplicate_labels = frozenset({"tp_rank", "pp_rank", "moe_ep_rank", "attn_tp_rank", "pid"})
    rank_labels = ("dp_rank", "tp_rank", "pp_rank")
    signals = (
        Signal("requests_running", QUEUE_COUNTS["requests_running"]),
        Signal("requests_waiting", QUEUE_COUNTS["requests_waiting"]),
        Signal("kv_cache_usage_ratio", _both("token_usage"), reduce="max"),
        Signal("preemptions_total", _both("num_retracted_requests_total")),
        Signal("prompt_tokens_total", _both("prompt_tokens_total")),
        Signal("generation_tokens_total", _both("generation_tokens_total")),
        Signal("prefix_cache_hits_total", CACHED_TOKENS),
        Signal("prefix_cache_queries_total", _both("prompt_tokens_total")),
        Signal("estimated_flops_total", _both("estimated_flops_per_gpu_total"), reduce="mean"),
        Signal("estimated_read_bytes_total", _both("estimated_read_bytes_per_gpu_total"), reduce="mean"),
        Signal("estimated_write_bytes_total", _both("estimated_write_bytes_per_gpu_total"), reduce="mean"),
        # The engine's own rate over the last verify batch (no counters of drafts): a level, read as one.
        Signal("spec_decode_acceptance_ratio", _both("spec_accept_rate"), reduce="mean"),
        Signal("lora_slots_used", LORA_SLOTS["lora_slots_used"]),
        Signal("lora_slots_total", LORA_SLOTS["lora_slots_total"]),
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
    extra_names = (*(name for usage, presence in POOLS.values() for name in usage + presence), *SPEC_ACCEPT_LENGTH)

    def matches(self, names: set[str]) -> bool:
        return has_prefix(names, "sglang:", "sglang_")

    def read(self, parsed: ParsedSamples) -> list[EngineReading]:
        """The totals: a queue gauge's per-class breakdown is left to the slices."""
        totals = dict(parsed)
        for names in QUEUE_COUNTS.values():
            for name in names:
                if name in parsed:
                    totals[name] = {key: value for key, value in parsed[name].items() if _is_total(key)}
        return super().read(totals)

    def finish(
        self,
        parsed: ParsedSamples,
        reading: Callable[[str], EngineReading],
        readings: dict[str, EngineReading],
    ) -> None:
        pools: dict[str, dict[str, float]] = {}
        for pool, (usage, presence) in POOLS.items():
            present = reduce_by_model(first_present(parsed, presence), "max", self.duplicate_labels)
            for model, value in reduce_by_model(first_present(parsed, usage), "max", self.duplicate_labels).items():
                if pool == "full" or value > 0 or present.get(model, 0.0) > 0:
                    pools.setdefault(model, {})[pool] = value
        for model, found in pools.items():
            each = reading(model)
            fullest = max(found.values())
            if each.kv_cache_usage_ratio is None or fullest > each.kv_cache_usage_ratio:
                each.kv_cache_usage_ratio = fullest
            if len(found) > 1:
                each.kv_pool_usage = found
        speculating = reduce_by_model(first_present(parsed, SPEC_ACCEPT_LENGTH), "max", self.duplicate_labels)
        for model, each in readings.items():
            if speculating.get(model, 0.0) <= 0:  # no speculative decoding: its 0 rate means nothing
                each.spec_decode_acceptance_ratio = None
        cached = first_present(parsed, counter_spellings(CACHED_TOKENS))
        for source in ("local", "external"):
            wire = {k for k, v in CACHED_SOURCES.items() if v == source}
            picked = {key: value for key, value in cached.items() if dict(key).get("cache_source", "total") in wire}
            for model, value in reduce_by_model(picked, "sum", self.duplicate_labels).items():
                reading(model).prompt_tokens_cached_total[source] = value

    def read_slices(self, parsed: ParsedSamples, limits: ScrapeLimits, readings: Sequence[EngineReading]) -> None:
        read_engine_slices(self, parsed, limits, readings, QUEUE_COUNTS)


MAPPINGS.register(SglangMapping(), order=30)
