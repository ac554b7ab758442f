"""What an operator can do about each stage, from the framework and the seed case (DESIGN.md)."""

from __future__ import annotations

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
        "cap --max-model-len (e.g. 4096) so long contexts do not dominate each decode step",
        "schedule shortest-job-first so short requests are not stuck behind long decodes",
        "do not add concurrency: low SM activity here is not idle capacity; add GPUs or quantize KV/weights instead",
    ),
    "kv_cache_capacity": (
        "raise the KV-cache share (--gpu-memory-utilization) or quantize the KV cache (fp8)",
        "enable prefix caching so shared prefixes occupy blocks once",
        "cap --max-model-len or max_num_seqs to stop preemption churn",
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
