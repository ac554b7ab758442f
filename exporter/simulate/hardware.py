"""Catalogues of GPUs and model shapes: the figures the roofline and the KV pool are computed from.

Sources (see shared/research/diagnosis-method.md §1.1 and §1.3):
- HBM bandwidth and dense BF16 tensor throughput: NVIDIA datasheets as transcribed in [S8a]-[S8d]
  (A100 80GB SXM 2,039 GB/s and 312 TFLOP/s; H100 SXM 3.35 TB/s and 989.4 TFLOP/s; H200 4.8 TB/s
  with the H100's compute). Dense, not the "with sparsity" figures.
- Model shapes: the models' HF config.json as recorded in the research note (Llama-3.1-8B: 32 layers,
  8 KV heads, head_dim 128, 8.03 B params; 70B: 80 layers, 8 KV heads, 70.6 B). The 13B is the
  Llama-2-13B / CodeLlama-13B shape (40 layers, 40 KV heads = MHA, hidden 5120), whose KV cost is the
  vLLM paper's 800 KB per token [S3].
- HBM capacities are what nvidia-smi reports (81920 MiB for A100 80GB, 81559 MiB for H100 80GB
  HBM3, 143771 MiB for H200); recalled from public nvidia-smi output, not re-checked.
- AMD Instinct MI300X (the one non-NVIDIA GPU, for AMD nodes): AMD's datasheet figures as quoted
  in its comment.
- Clocks, TDP and NVLink bandwidth are datasheet values (A100 1410 MHz boost, 400 W, NVLink3
  600 GB/s; H100/H200 1980 MHz, 700 W, NVLink4 900 GB/s), recalled: they only feed cosmetic gauges
  (clock, power) and the intra-node all-reduce time, which is small next to HBM time.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
BF16_BYTES = 2


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model; rates are peaks (dense BF16), capacities as the driver reports them."""

    key: str
    model_name: str  # dcgm-exporter `modelName`
    hbm_bytes: int
    hbm_bandwidth_bytes_per_second: float
    bf16_flops_per_second: float
    nvlink_bytes_per_second: float  # per GPU, both directions together
    sm_clock_mhz: int
    mem_clock_mhz: int
    tdp_watts: float
    idle_watts: float
    #: whose GPU: "nvidia" nodes serve dcgm-exporter's text, "amd" nodes AMD device-metrics-exporter's
    vendor: str = "nvidia"
    #: its PCIe link, x16 at this generation (H100 and H200 SXM Gen5, A100 Gen4)
    pcie_generation: int = 5

    @property
    def ridge_flops_per_byte(self) -> float:
        """Arithmetic intensity where compute and bandwidth limits meet (about 153/295/206)."""
        return self.bf16_flops_per_second / self.hbm_bandwidth_bytes_per_second


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape, enough for weights, KV bytes and FLOPs per token."""

    key: str
    served_name: str  # vLLM `model_name` label
    params: float
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    max_position_embeddings: int
    dtype_bytes: int = BF16_BYTES
    #: a hybrid model's attention window in tokens (0: every layer attends the whole context)
    sliding_window: int = 0
    #: of `layers`, those with full attention; the rest use the sliding window (0: all full)
    full_attention_layers: int = 0

    @property
    def hybrid(self) -> bool:
        return self.sliding_window > 0 and 0 < self.full_attention_layers < self.layers

    @property
    def weight_bytes(self) -> float:
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x KV heads x head_dim x dtype bytes (vLLM paper §3; vllmstat)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def flops_per_token(self) -> float:
        """Dense matmul FLOPs per token: 2 per parameter (multiply and add)."""
        return 2.0 * self.params

    def attention_flops(self, query_tokens: int, context_tokens: float) -> float:
        """QK^T and AV: 2 matmuls x 2 FLOPs x query heads x head_dim per (query, key) pair, per layer."""
        return 4.0 * self.layers * self.attention_heads * self.head_dim * query_tokens * context_tokens


GPUS: dict[str, GpuSpec] = {
    gpu.key: gpu
    for gpu in (
        GpuSpec(
            "a100-80gb",
            "NVIDIA A100-SXM4-80GB",
            81920 * MIB,
            2.039e12,
            312e12,
            600e9,
            1410,
            1593,
            400.0,
            60.0,
            pcie_generation=4,
        ),
        GpuSpec("h100-sxm", "NVIDIA H100 80GB HBM3", 81559 * MIB, 3.35e12, 989.4e12, 900e9, 1980, 2619, 700.0, 70.0),
        GpuSpec("h200", "NVIDIA H200", 143771 * MIB, 4.8e12, 989.4e12, 900e9, 1980, 3201, 700.0, 75.0),
        # AMD Instinct MI300X: 192 GB HBM3 at 5.3 TB/s, 1307.4 dense BF16 TFLOP/s, 7 XGMI links of
        # 128 GB/s (AMD datasheet); 196592 MB is what amd-smi reports; 2100 MHz peak engine clock,
        # 1300 MHz memory clock, 750 W (datasheet, recalled; cosmetic gauges only).
        GpuSpec(
            "mi300x", "AMD Instinct MI300X", 196592 * MIB, 5.3e12, 1307.4e12, 896e9, 2100, 1300, 750.0, 140.0, "amd"
        ),
    )
}

MODELS: dict[str, ModelSpec] = {
    model.key: model
    for model in (
        ModelSpec("codellama-13b", "codellama/CodeLlama-13b-hf", 13.016e9, 40, 5120, 40, 40, 128, 16384),
        ModelSpec("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 32, 4096, 32, 8, 128, 131072),
        ModelSpec("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", 70.6e9, 80, 8192, 64, 8, 128, 131072),
        # Gemma 3 27B (text_config of its config.json, recalled): 62 layers, 16 KV heads of 128, a
        # 1,024-token sliding window on five layers of every six (10 full-attention layers); the
        # model of the SGLang hybrid capture (tests/fixtures/engines/sglang-0.5.23-hybrid-priority.prom).
        ModelSpec("gemma-3-27b", "google/gemma-3-27b-it", 27.0e9, 62, 5376, 32, 16, 128, 131072, BF16_BYTES, 1024, 10),
    )
}
