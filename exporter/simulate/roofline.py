"""Step time from the roofline: the one formula every simulated latency and GPU counter comes from.

    t_step = max(FLOPs / (peak x MFU), bytes / (HBM bandwidth x MBU)) + t_all-reduce + t_host

with bytes = weights / TP + KV read + KV written (shared/research/diagnosis-method.md §1.3, the
standard bound servcalc and the vLLM paper use). Decode reads every weight byte once per step and
every running sequence's KV, so it stays memory-bound; prefill tokens add 2 x params FLOPs each and
turn a step compute-bound once a few hundred are batched (§1.2, §1.4).

Tensor parallelism splits weights, KV and FLOPs across TP ranks and adds two all-reduces per layer
of tokens x hidden x 2 bytes. A ring all-reduce moves 2 (TP-1)/TP of the message through each rank
(§2 item 7 of the note); when the TP group spans nodes, that traffic goes over each GPU's RDMA NIC (a
flat ring over the rails: an upper bound, NCCL's hierarchical algorithms move less), otherwise
over NVLink.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.simulate.hardware import GpuSpec, ModelSpec

GIB = 1024**3


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of the peaks, and the CPU time the engine spends per step.

    MBU defaults to 0.85, the top of the 60-85 % range reported for tuned stacks [S9]; MFU to 0.6
    for prefill GEMMs (PaLM reached 0.76 at large batch [S2]). `host_overhead_seconds` is the
    scheduler/Python time per step during which the GPU waits (Vidur's cpu_overheads [S11]).
    """

    mfu: float = 0.6
    mbu: float = 0.85
    host_overhead_seconds: float = 0.0002


@dataclass(frozen=True)
class Parallelism:
    tensor_parallel: int = 1
    nodes: int = 1  # nodes the TP group spans; > 1 puts the all-reduce on the RDMA links

    @property
    def gpus_per_node(self) -> int:
        return max(1, self.tensor_parallel // self.nodes)

    @property
    def cross_node(self) -> bool:
        return self.nodes > 1


@dataclass(frozen=True)
class LinkState:
    """What the all-reduce of one step sees on the network at this moment."""

    nic_bytes_per_second: float = 50e9  # 400 Gb/s
    available_fraction: float = 1.0  # 1 - background utilization of the NIC / fabric
    latency_seconds: float = 8e-6  # per collective hop across the fabric
    nvlink_latency_seconds: float = 3e-6


@dataclass
class StepWork:
    """Tokens and attention of one engine step (whole TP group, before sharding)."""

    decode_seqs: int = 0
    prefill_tokens: int = 0
    kv_read_tokens: float = 0.0  # context tokens whose K and V are read (decode and prefill chunks)
    attention_pairs: float = 0.0  # (query, key) pairs in attention, for its FLOPs

    @property
    def tokens(self) -> int:
        return self.decode_seqs + self.prefill_tokens


@dataclass(frozen=True)
class StepCost:
    """Per GPU of the TP group: what one step moved and computed, and how long it took."""

    flops: float
    hbm_bytes: float
    memory_seconds: float
    compute_seconds: float
    comm_seconds: float
    host_seconds: float
    network_bytes: float  # sent by each GPU's NIC (and received: ring all-reduce is symmetric)
    nvlink_bytes: float
    comm_stall_seconds: float  # extra all-reduce time caused by background traffic

    @property
    def kernel_seconds(self) -> float:
        return max(self.memory_seconds, self.compute_seconds) + self.comm_seconds

    @property
    def step_seconds(self) -> float:
        return self.kernel_seconds + self.host_seconds


def step_cost(
    model: ModelSpec,
    gpu: GpuSpec,
    parallel: Parallelism,
    efficiency: Efficiency,
    work: StepWork,
    link: LinkState,
) -> StepCost:
    tp = parallel.tensor_parallel
    tokens = work.tokens
    flops = (model.flops_per_token * tokens + model.attention_flops(1, work.attention_pairs)) / tp
    kv = model.kv_bytes_per_token
    hbm_bytes = (model.weight_bytes + (work.kv_read_tokens + tokens) * kv) / tp
    memory = hbm_bytes / (gpu.hbm_bandwidth_bytes_per_second * efficiency.mbu)
    compute = flops / (gpu.bf16_flops_per_second * efficiency.mfu)
    comm = stall = network_bytes = nvlink_bytes = 0.0
    if tp > 1 and tokens > 0:
        collectives = 2 * model.layers
        per_rank = 2.0 * (tp - 1) / tp * tokens * model.hidden_size * model.dtype_bytes * collectives
        if parallel.cross_node:
            available = max(0.05, link.available_fraction)
            unloaded = per_rank / link.nic_bytes_per_second + collectives * link.latency_seconds
            # Others' traffic leaves `available` of the rail, and congestion queues every hop too.
            comm = unloaded / available
            stall = unloaded * (1.0 / available - 1.0)
            network_bytes = per_rank
        else:
            comm = per_rank / (gpu.nvlink_bytes_per_second / 2) + collectives * link.nvlink_latency_seconds
            nvlink_bytes = per_rank
    return StepCost(
        flops=flops,
        hbm_bytes=hbm_bytes,
        memory_seconds=memory,
        compute_seconds=compute,
        comm_seconds=comm,
        host_seconds=efficiency.host_overhead_seconds,
        network_bytes=network_bytes,
        nvlink_bytes=nvlink_bytes,
        comm_stall_seconds=max(0.0, stall),
    )


def kv_pool_tokens(
    model: ModelSpec,
    gpu: GpuSpec,
    tensor_parallel: int,
    gpu_memory_utilization: float,
    activation_reserve_bytes: float,
) -> int:
    """Tokens of KV the engine can hold: (HBM x utilization - weights/TP - activations) per GPU,
    times TP (each rank holds its share of the KV heads), over KV bytes per token — how vLLM sizes
    its block pool after profiling a forward pass."""
    per_gpu = gpu.hbm_bytes * gpu_memory_utilization - model.weight_bytes / tensor_parallel - activation_reserve_bytes
    if per_gpu <= 0:
        return 0
    return int(per_gpu * tensor_parallel // model.kv_bytes_per_token)


def roofline_decode_seconds(model: ModelSpec, gpu: GpuSpec, batch: int = 1, context: int = 0) -> float:
    """The pure bound of §1.4 (no efficiency factors, no overhead): bytes / peak bandwidth."""
    return (model.weight_bytes + batch * context * model.kv_bytes_per_token) / gpu.hbm_bandwidth_bytes_per_second
