"""Actions that read the engine's own settings (`llm_engine_config_info`).

A stage's actions are plain lines or `Advice`: a line whose wording depends on what the engine
already does. One that reports prefix caching on is never told to enable it, nor one whose
max_model_len is already at most 4,096 to cap it, and the settings it has are named with their
values. Where the engine does not say (it exports no settings, or not this one), the line is the
generic one, which says "if not already": advice must not read as news to an engine that already
took it. A remedy no engine exports a setting for (the scheduling policy: vLLM's
`cache_config_info` is its CacheConfig alone) is a plain line worded that way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

Settings = Mapping[str, str]

#: the seed case's remedy: a code-completion service's contexts fit in 4,096 tokens
SUGGESTED_MAX_MODEL_LEN = 4096
# vLLM's docs suggest up to about 0.95; above it activations and CUDA graphs run out of room.
MAX_GPU_MEMORY_UTILIZATION = 0.95
_PREFIX_CACHING = "enable prefix caching"
#: how a generic line says the engine may have taken it already
IF_NOT_ALREADY = "if not already"


@dataclass(frozen=True)
class Advice:
    """A generic action line and how to word it for one engine (None: nothing left to do)."""

    text: str
    tailor: Callable[[str, Settings], str | None]

    def for_engine(self, settings: Settings) -> str | None:
        return self.tailor(self.text, settings)

    def __str__(self) -> str:
        return self.text


Action = str | Advice


def tailored(actions: tuple[Action, ...], settings: Settings) -> list[str]:
    """The actions for an engine with these settings, in order, without those it already took."""
    out = []
    for action in actions:
        line = action if isinstance(action, str) else action.for_engine(settings)
        if line is not None:
            out.append(line)
    return out


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _prefix_caching(text: str, settings: Settings) -> str | None:
    state = settings.get("prefix_caching")
    if state == "true":
        return None
    if state == "false":
        return text.replace(
            f"{_PREFIX_CACHING}, {IF_NOT_ALREADY},", f"{_PREFIX_CACHING} (it is off: --enable-prefix-caching)", 1
        )
    return text


def enable_prefix_caching(why: str) -> Advice:
    """ "enable prefix caching, if not already, <why>": dropped where it is on, said to be off
    where it is off."""
    return Advice(f"{_PREFIX_CACHING}, {IF_NOT_ALREADY}, {why}", _prefix_caching)


def _kv_share(text: str, settings: Settings) -> str | None:
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
        return text if not quantized else f"raise the KV-cache share (--gpu-memory-utilization), {IF_NOT_ALREADY}"
    if utilization < MAX_GPU_MEMORY_UTILIZATION:
        line = (
            f"gpu_memory_utilization is {utilization:.2f}{pool}: raise it to {MAX_GPU_MEMORY_UTILIZATION:.2f} "
            "for more KV blocks"
        )
        return line + (f", or {quantize}" if quantize else "")
    if quantize:
        return f"gpu_memory_utilization is already {utilization:.2f}{pool}: {quantize}"
    return None  # both already done: the remaining actions (shorter contexts, more GPUs) apply


RAISE_KV_SHARE = Advice(
    f"raise the KV-cache share (--gpu-memory-utilization) or quantize the KV cache (fp8), {IF_NOT_ALREADY}",
    _kv_share,
)


def _cap_context(text: str, settings: Settings) -> str | None:
    context = _number(settings.get("max_model_len"))
    if context is None:
        return text
    if context <= SUGGESTED_MAX_MODEL_LEN:
        return None  # already capped: the other actions apply
    return (
        f"max_model_len is {context:.0f}: cap it (--max-model-len {SUGGESTED_MAX_MODEL_LEN}) "
        "so long contexts do not dominate each decode step"
    )


CAP_CONTEXT = Advice(
    f"cap --max-model-len (e.g. {SUGGESTED_MAX_MODEL_LEN}), {IF_NOT_ALREADY}, so long contexts do not dominate "
    "each decode step",
    _cap_context,
)


def _cap_churn(text: str, settings: Settings) -> str | None:
    context = _number(settings.get("max_model_len"))
    if context is None:
        return text
    if context <= SUGGESTED_MAX_MODEL_LEN:  # the context is capped already: what is left is max_num_seqs
        return f"lower max_num_seqs to stop preemption churn (max_model_len is already {context:.0f})"
    return f"cap --max-model-len (now {context:.0f}) or max_num_seqs to stop preemption churn"


CAP_CHURN = Advice("cap --max-model-len or max_num_seqs to stop preemption churn", _cap_churn)
