"""Triton Inference Server with the TensorRT-LLM backend (`nv_trt_llm_*` on :8002/metrics).

Where any model reports TensorRT-LLM or LLM token families, readings are made only for those;
Triton also serves pre/post-processing and ensemble models whose queues are not an engine's. KV usage
is the `fraction` block metric (newer backends) or used/max; waiting is the `waiting` request metric
or, on older backends, the core pending-request gauge. TTFT exists only when histogram latencies are
enabled, in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable

from exporter.model import EngineReading
from exporter.promtext import ParsedSamples
from exporter.sources.engines.common import (
    DeclarativeMapping,
    HistogramSignal,
    Signal,
    has_prefix,
    reduce_by_model,
)
from exporter.sources.engines.registry import MAPPINGS

_REQUESTS = "nv_trt_llm_request_metrics"
_KV_BLOCKS = "nv_trt_llm_kv_cache_block_metrics"
_PENDING = "nv_inference_pending_request_count"
# Triton keeps one series per model instance version; they are one engine.
_VERSION = frozenset({"version"})


class TritonMapping(DeclarativeMapping):
    engine_type = "triton"
    signals = (
        Signal("requests_running", (_REQUESTS,), match=(("request_type", "active"),)),
        Signal("requests_waiting", (_REQUESTS,), match=(("request_type", "waiting"),)),
        Signal("kv_cache_usage_ratio", (_KV_BLOCKS,), reduce="max", match=(("kv_cache_block_type", "fraction"),)),
        Signal("prompt_tokens_total", ("nv_llm_input_token_len_sum",)),
        Signal("generation_tokens_total", ("nv_llm_output_token_len_sum",)),
    )
    histograms = (HistogramSignal("time_to_first_token", ("nv_inference_first_response_histogram_ms",), scale=0.001),)
    extra_names = (_PENDING,)

    def matches(self, names: set[str]) -> bool:
        if has_prefix(names, "nv_trt_llm_", "nv_llm_"):
            return True
        # Triton core serves `nv_inference_*` for every backend; with the vLLM backend the `vllm:`
        # families are the engine's, and the vLLM mapping reads them.
        return has_prefix(names, "nv_inference_") and not has_prefix(names, "vllm:")

    def read(self, parsed: ParsedSamples) -> list[EngineReading]:
        llm_models: set[str] = set()
        for name in (_REQUESTS, _KV_BLOCKS, "nv_llm_input_token_len_sum", "nv_llm_output_token_len_sum"):
            llm_models.update(reduce_by_model(parsed.get(name, {}), "sum", _VERSION))
        readings = super().read(parsed)
        if not llm_models:  # a core-only Triton the user pointed us at: every model is the engine
            return readings
        return [r for r in readings if r.model in llm_models]

    def finish(
        self,
        parsed: ParsedSamples,
        reading: Callable[[str], EngineReading],
        readings: dict[str, EngineReading],
    ) -> None:
        blocks = parsed.get(_KV_BLOCKS, {})
        used = reduce_by_model(blocks, "max", _VERSION, (("kv_cache_block_type", "used"),))
        capacity = reduce_by_model(blocks, "max", _VERSION, (("kv_cache_block_type", "max"),))
        for model, value in used.items():
            if capacity.get(model, 0) > 0 and reading(model).kv_cache_usage_ratio is None:
                reading(model).kv_cache_usage_ratio = value / capacity[model]
        pending = reduce_by_model(parsed.get(_PENDING, {}), "sum", _VERSION)
        for model, value in pending.items():
            if reading(model).requests_waiting is None:
                reading(model).requests_waiting = value


# Before vLLM: a Triton serving TensorRT-LLM models can carry a vLLM backend's `vllm:` families too,
# and its `nv_trt_llm_*` families say the server is Triton.
MAPPINGS.register(TritonMapping(), order=10)
