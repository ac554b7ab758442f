"""What an operator can do about each stage, from the framework and the seed case (DESIGN.md)."""

from __future__ import annotations

from collections.abc import Mapping

# The actions that depend on a setting the engine may export (`llm_engine_config_info`).
_PREFIX_CACHING = "enable prefix caching"
_CAP_CONTEXT = "cap --max-model-len (e.g. 4096) so long contexts do not dominate each decode step"
_CAP_CHURN = "cap --max-model-len or max_num_seqs to stop preemption churn"
#: the seed case's remedy: a code-completion service's contexts fit in 4,096 tokens
_SUGGESTED_MAX_MODEL_LEN = 4096

ACTIONS: dict[str, tuple[str, ...]] = {
    "queueing": (
        "add replicas or raise max_num_seqs while KV-cache headroom and latency allow",
        "route new requests to less loaded replicas (queue-aware load balancing)",
        "shed or defer low-priority traffic at the gateway",
    ),
    "prefill_compute": (
        "enable chunked prefill so long prompts do not stall decode steps",
        "enable prefix caching to skip recomputing shared prompt prefixes",
        "split prefill and decode onto separate GPUs (disaggregated serving) for long-document traffic",
    ),
    "decode_memory_bandwidth": (
        "enable prefix caching to cut KV reads and recomputation",
        _CAP_CONTEXT,
        "schedule shortest-job-first so short requests are not stuck behind long decodes",
        "do not add concurrency: low SM activity here is not idle capacity; add GPUs or quantize KV/weights instead",
    ),
    "kv_cache_capacity": (
        "raise the KV-cache share (--gpu-memory-utilization) or quantize the KV cache (fp8)",
        "enable prefix caching so shared prefixes occupy blocks once",
        _CAP_CHURN,
        "add replicas or GPUs (tensor parallelism) for more KV capacity",
    ),
    "cross_node_communication": (
        "check RDMA congestion control (ECN/PFC, DCQCN) and the fabric for hot links",
        "place tensor-parallel groups inside one node (NVLink) and use pipeline parallelism across nodes",
        "verify the RDMA NIC and GPU share a PCIe switch / NUMA node (GPUDirect RDMA)",
    ),
    "host_overhead": (
        "enable CUDA graphs and async output processing; avoid --enforce-eager",
        "give the engine process dedicated CPU cores and check NUMA pinning",
        "reduce per-step Python work (logprobs, detokenization, guided decoding) or move it off the scheduler",
    ),
}

_KV_SHARE = "raise the KV-cache share (--gpu-memory-utilization) or quantize the KV cache (fp8)"
# vLLM's docs suggest up to about 0.95; above it activations and CUDA graphs run out of room.
_MAX_GPU_MEMORY_UTILIZATION = 0.95


def _kv_share(settings: Mapping[str, str]) -> str | None:
    """The KV-share advice with the engine's own values: its utilization, pool and KV dtype."""
    utilization = _number(settings.get("gpu_memory_utilization"))
    quantized = settings.get("kv_cache_dtype", "").startswith("fp8")
    pool = ""
    if "kv_cache_size_tokens" in settings:
        pool = f" (KV pool {settings['kv_cache_size_tokens']} tokens)"
    elif "num_gpu_blocks" in settings and "block_size" in settings:
        pool = f" (KV pool {settings['num_gpu_blocks']} blocks of {settings['block_size']} tokens)"
    quantize = "" if quantized else "quantize the KV cache (--kv-cache-dtype fp8)"
    if utilization is None:
        return _KV_SHARE if not quantized else "raise the KV-cache share (--gpu-memory-utilization)"
    if utilization < _MAX_GPU_MEMORY_UTILIZATION:
        line = (
            f"gpu_memory_utilization is {utilization:.2f}{pool}: raise it to {_MAX_GPU_MEMORY_UTILIZATION:.2f} "
            "for more KV blocks"
        )
        return line + (f", or {quantize}" if quantize else "")
    if quantize:
        return f"gpu_memory_utilization is already {utilization:.2f}{pool}: {quantize}"
    return None  # both already done: the remaining actions (shorter contexts, more GPUs) apply


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def stage_actions(stage: str, settings: Mapping[str, str]) -> list[str]:
    """ACTIONS[stage] for this engine: nothing it already does, and settings named with their values.

    An engine that exports no settings gets the generic advice; one that reports prefix caching on
    is never told to enable it, nor one whose max_model_len is already at most 4,096 to cap it.
    """
    out = []
    prefix_caching = settings.get("prefix_caching")
    for line in ACTIONS[stage]:
        if _PREFIX_CACHING in line:
            if prefix_caching == "true":
                continue
            if prefix_caching == "false":
                line = line.replace(_PREFIX_CACHING, f"{_PREFIX_CACHING} (it is off: --enable-prefix-caching)", 1)
        elif line == _KV_SHARE:
            rewritten = _kv_share(settings)
            if rewritten is None:
                continue
            line = rewritten
        elif line in (_CAP_CONTEXT, _CAP_CHURN) and (context := _number(settings.get("max_model_len"))) is not None:
            if line == _CAP_CHURN:
                line = f"cap --max-model-len (now {context:.0f}) or max_num_seqs to stop preemption churn"
            elif context <= _SUGGESTED_MAX_MODEL_LEN:
                continue  # already capped: the other actions apply
            else:
                line = (
                    f"max_model_len is {context:.0f}: cap it (--max-model-len {_SUGGESTED_MAX_MODEL_LEN}) "
                    "so long contexts do not dominate each decode step"
                )
        out.append(line)
    return out
