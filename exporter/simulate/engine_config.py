"""vLLM's serving flags as the simulated engine takes them, and which of them a phase may change."""

from __future__ import annotations

from dataclasses import dataclass

from exporter.simulate.roofline import Efficiency

RUNTIME_KEYS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "chunked_prefill",
    "enable_prefix_caching",
    "scheduling",
    "max_model_len",
    "cascade_attention",
    "kv_watermark",
    "mfu",
    "mbu",
    "host_overhead_ms",
    "gc_collections_per_request",
    "max_num_queued_reqs",
    "sleep_level",
)


@dataclass(frozen=True)
class EngineConfig:
    """vLLM's serving flags that matter to the model (defaults as vLLM V1's where it has one)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    scheduling: str = "fcfs"
    max_model_len: int = 0  # 0: the model's context length
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    activation_reserve_gib: float = 2.0
    cascade_attention: bool = True
    # Blocks kept free when admitting a waiting request, so running ones can grow without being
    # preempted. V1 has none (0.0): under KV pressure a just-admitted request is preempted and
    # re-admitted over and over (vLLM PR #28018, issue #25538); V0 kept 1 %, PR #44594 proposes one.
    # On SGLang it is kept in the sliding-window pool too, as its reservation for running requests.
    kv_watermark: float = 0.0
    mfu: float = 0.6
    mbu: float = 0.85
    host_overhead_ms: float = 0.2
    gc_collections_per_request: float = 3.0
    # vLLM 0.32's admission limit (`--max-num-queued-reqs`): at most this many unfinished requests,
    # the next refused with HTTP 503 and counted in vllm:admission_rejections_total; 0: no limit.
    max_num_queued_reqs: int = 0
    # vLLM's sleep mode (`POST /sleep?level=N`): 0 awake; asleep, the replica serves nothing, the
    # router sends it nothing, and its GPUs hold only what the level keeps (level 1 offloads the
    # weights to host memory, level 2 discards them).
    sleep_level: int = 0
    # SGLang's `--swa-full-tokens-ratio` for hybrid sliding-window models: the SWA pool's size over
    # the full-attention pool's, in tokens (its default 0.8); other models and vLLM ignore it.
    swa_full_tokens_ratio: float = 0.8

    @property
    def efficiency(self) -> Efficiency:
        return Efficiency(self.mfu, self.mbu, self.host_overhead_ms / 1000.0)
