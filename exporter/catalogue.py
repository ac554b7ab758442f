"""The one catalogue of metric families this project exports.

Exposition takes HELP and TYPE from here; dashboards, alert rules and their lints check every
query against it, so a family that is not listed here cannot be referenced anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

MetricType = Literal["gauge", "counter", "summary"]

ENGINE_LABELS = ("engine", "engine_type", "model")
# Series of an engine found through Kubernetes discovery also carry its pod's labels.
ENGINE_SERIES_LABELS = ENGINE_LABELS + ("pod", "namespace", "container")
# The engine settings `llm_engine_config_info` carries (where the engine exports them: vLLM's
# `cache_config_info`), named for what they are, not for one engine's spelling.
ENGINE_SETTINGS = (
    "prefix_caching",
    "gpu_memory_utilization",
    "block_size",
    "num_gpu_blocks",
    "kv_cache_dtype",
    "kv_cache_size_tokens",
    "max_model_len",
)
# `engine` when the GPU is attributed to one; `pod`/`namespace`/`container` when known (kubelet
# pod-resources or dcgm-exporter); `gpu_i_id`/`gpu_i_profile` on MIG instances (dcgm-exporter ingest).
# `vendor` on every GPU series ("nvidia", "amd", "ascend", "gaudi"); AMD partitions keep their
# `gpu_partition_id`/`compute_partition`/`memory_partition`, Ascend chips their `pci_bus_id`.
GPU_LABELS = (
    "gpu",
    "uuid",
    "gpu_model",
    "vendor",
    "engine",
    "pod",
    "namespace",
    "container",
    "gpu_i_id",
    "gpu_i_profile",
    "gpu_partition_id",
    "compute_partition",
    "memory_partition",
    "pci_bus_id",
)
RDMA_LABELS = ("device", "port")
HOST_CPU_LABELS = ("cpu",)
SOURCE_LABELS = ("source", "target")
GATEWAY_LABELS = ("gateway", "gateway_type")
PROBE_LABELS = ("probe", "path")
QUANTILES = (0.5, 0.95, 0.99)
SLO_LABELS = ("slo",)
SLO_SERIES_LABELS = ENGINE_SERIES_LABELS + ("slo", "dimension")
# The latency summaries, each keyed by the engine-histogram key (EngineReading.histograms) behind
# it: the engine source, the recording rules and the dashboards all read this one map.
LATENCY_FAMILIES: Mapping[str, str] = MappingProxyType(
    {
        "time_to_first_token": "llm_engine_time_to_first_token_seconds",
        "inter_token_latency": "llm_engine_inter_token_latency_seconds",
        "e2e_request_latency": "llm_engine_e2e_request_latency_seconds",
        "queue_time": "llm_engine_queue_time_seconds",
    }
)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]


def _spec(name: str, type_: MetricType, help_: str, labels: tuple[str, ...]) -> MetricSpec:
    return MetricSpec(name, type_, help_, labels)


_WINDOW_NOTE = "quantiles over the exporter's window, from the engine's histogram bucket deltas"

CATALOGUE: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        # Engines
        _spec(
            "llm_engine_up",
            "gauge",
            "1 if the last scrape of the engine succeeded and parsed, else 0.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_requests_running",
            "gauge",
            "Requests in the running batch, summed over data-parallel ranks.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_requests_waiting",
            "gauge",
            "Requests waiting for admission, summed over data-parallel ranks.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_kv_cache_usage_ratio",
            "gauge",
            "KV-cache usage 0-1; the maximum over data-parallel ranks, since the fullest rank is the one that "
            "preempts.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_preemptions_total",
            "counter",
            "Requests preempted (vLLM) or retracted (SGLang) because KV-cache blocks ran out.",
            ENGINE_SERIES_LABELS,
        ),
        _spec("llm_engine_prompt_tokens_total", "counter", "Prompt tokens processed.", ENGINE_SERIES_LABELS),
        _spec("llm_engine_generation_tokens_total", "counter", "Tokens generated.", ENGINE_SERIES_LABELS),
        _spec(
            "llm_engine_prefix_cache_hit_ratio",
            "gauge",
            "Prefix-cache hit ratio 0-1 over the exporter's window (hit tokens / queried tokens).",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_config_info",
            "gauge",
            "Always 1; labels carry the engine's serving settings where it exports them (vLLM's "
            "cache_config_info): prefix_caching true/false, gpu_memory_utilization, block_size, num_gpu_blocks, "
            "kv_cache_dtype, kv_cache_size_tokens, max_model_len (vLLM's pool over its kv_cache_max_concurrency: "
            "the context one request may hold, max_model_len for full-attention models); a setting the engine "
            "does not report is left out.",
            ENGINE_SERIES_LABELS + ENGINE_SETTINGS,
        ),
        _spec(
            "llm_engine_time_to_first_token_seconds",
            "summary",
            f"Time to first token; {_WINDOW_NOTE}.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_inter_token_latency_seconds",
            "summary",
            f"Inter-token latency (time per output token where the engine only has that); {_WINDOW_NOTE}.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_e2e_request_latency_seconds",
            "summary",
            f"End-to-end request latency; {_WINDOW_NOTE}.",
            ENGINE_SERIES_LABELS,
        ),
        _spec(
            "llm_engine_queue_time_seconds",
            "summary",
            f"Time requests waited in the engine queue; {_WINDOW_NOTE}.",
            ENGINE_SERIES_LABELS,
        ),
        # GPUs
        _spec("llm_gpu_up", "gauge", "1 if the GPU answered its last query, else 0.", GPU_LABELS),
        _spec(
            "llm_gpu_utilization_ratio",
            "gauge",
            "Fraction of time any kernel ran (NVML utilization; AMD gfx activity, Ascend AI Core, Gaudi "
            "utilization), not how busy the SMs were.",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_sm_active_ratio",
            "gauge",
            "Fraction of time at least one warp was resident on an SM, averaged over SMs (DCGM 1002 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_sm_occupancy_ratio",
            "gauge",
            "Resident warps as a fraction of the maximum, averaged over SMs (DCGM 1003 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_tensor_active_ratio",
            "gauge",
            "Fraction of cycles the tensor pipes were active (DCGM 1004 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_dram_active_ratio",
            "gauge",
            "Fraction of cycles device memory was sending or receiving data (DCGM 1005 / GPM); practical peak about "
            "0.8. AMD: memory-controller (UMC) activity; Ascend: HBM bandwidth utilization (docs/metrics.md).",
            GPU_LABELS,
        ),
        _spec("llm_gpu_memory_used_bytes", "gauge", "HBM in use.", GPU_LABELS),
        _spec("llm_gpu_memory_total_bytes", "gauge", "HBM capacity.", GPU_LABELS),
        _spec("llm_gpu_power_watts", "gauge", "Board power draw.", GPU_LABELS),
        _spec("llm_gpu_temperature_celsius", "gauge", "GPU core temperature.", GPU_LABELS),
        _spec("llm_gpu_sm_clock_hertz", "gauge", "SM clock.", GPU_LABELS),
        _spec("llm_gpu_pcie_transmit_bytes_total", "counter", "Bytes sent over PCIe.", GPU_LABELS),
        _spec("llm_gpu_pcie_receive_bytes_total", "counter", "Bytes received over PCIe.", GPU_LABELS),
        _spec("llm_gpu_nvlink_transmit_bytes_total", "counter", "Bytes sent over NVLink.", GPU_LABELS),
        _spec("llm_gpu_nvlink_receive_bytes_total", "counter", "Bytes received over NVLink.", GPU_LABELS),
        _spec(
            "llm_gpu_xid_errors_total",
            "counter",
            "XID errors reported by the driver, by XID code.",
            GPU_LABELS + ("xid",),
        ),
        _spec(
            "llm_gpu_pcie_transmit_bytes_per_second",
            "gauge",
            "PCIe transmit rate averaged over the sample window, headers included (DCGM 1009 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_pcie_receive_bytes_per_second",
            "gauge",
            "PCIe receive rate averaged over the sample window, headers included (DCGM 1010 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_nvlink_transmit_bytes_per_second",
            "gauge",
            "NVLink transmit rate over all links, averaged over the sample window (DCGM 1011 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_nvlink_receive_bytes_per_second",
            "gauge",
            "NVLink receive rate over all links, averaged over the sample window (DCGM 1012 / GPM).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_throttle_reason_active",
            "gauge",
            "1 while the driver reports this clock-event (throttle) reason, else 0 (NVML clocks-event reasons / DCGM "
            "112).",
            GPU_LABELS + ("reason",),
        ),
        _spec(
            "llm_gpu_healthy",
            "gauge",
            "1 while the device reports itself healthy, else 0 (AMD gpu_health, Ascend health_status).",
            GPU_LABELS,
        ),
        _spec(
            "llm_gpu_ecc_errors_total",
            "counter",
            "Device-memory ECC errors since the driver loaded, by severity (correctable, uncorrectable).",
            GPU_LABELS + ("severity",),
        ),
        _spec(
            "llm_gpu_interconnect_transmit_bytes_total",
            "counter",
            "Bytes sent over the vendor's scale-up links (AMD XGMI), all links summed, by link.",
            GPU_LABELS + ("link",),
        ),
        _spec(
            "llm_gpu_interconnect_receive_bytes_total",
            "counter",
            "Bytes received over the vendor's scale-up links (AMD XGMI), all links summed, by link.",
            GPU_LABELS + ("link",),
        ),
        # RDMA ports
        _spec("llm_rdma_port_up", "gauge", "1 if the port state is ACTIVE, else 0.", RDMA_LABELS),
        _spec("llm_rdma_port_link_rate_bytes_per_second", "gauge", "Negotiated link rate.", RDMA_LABELS),
        _spec("llm_rdma_port_transmit_bytes_total", "counter", "Bytes sent (sysfs 4-octet words x 4).", RDMA_LABELS),
        _spec("llm_rdma_port_receive_bytes_total", "counter", "Bytes received (sysfs 4-octet words x 4).", RDMA_LABELS),
        _spec(
            "llm_rdma_port_transmit_utilization_ratio",
            "gauge",
            "Transmit throughput over the window as a fraction of the link rate.",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_receive_utilization_ratio",
            "gauge",
            "Receive throughput over the window as a fraction of the link rate.",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_transmit_wait_total",
            "counter",
            "Ticks the port had data to send but no flow-control credits (port_xmit_wait).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_cnp_handled_total",
            "counter",
            "Congestion notification packets handled by the reaction point (rp_cnp_handled).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_cnp_sent_total",
            "counter",
            "Congestion notification packets sent by the notification point (np_cnp_sent).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_ecn_marked_packets_total",
            "counter",
            "ECN-marked RoCE packets received (np_ecn_marked_roce_packets).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_retransmissions_total",
            "counter",
            "Retransmission events (timeouts, sequence errors, RNR retries).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_errors_total",
            "counter",
            "Port error counters by kind, read every 6th collection.",
            RDMA_LABELS + ("kind",),
        ),
        _spec(
            "llm_rdma_port_info",
            "gauge",
            "Always 1; labels carry the port's link layer (InfiniBand, Ethernet for RoCE) and its network interface "
            "where the kernel names one.",
            RDMA_LABELS + ("link_layer", "netdev"),
        ),
        _spec(
            "llm_rdma_port_transmit_packets_total",
            "counter",
            "Packets sent (port_xmit_packets; rxe sent_pkts).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_receive_packets_total",
            "counter",
            "Packets received (port_rcv_packets; rxe rcvd_pkts).",
            RDMA_LABELS,
        ),
        _spec(
            "llm_rdma_port_counter_saturated",
            "gauge",
            "1 while a PMA counter is stuck at its maximum (PMA counters clamp, they do not wrap): its rate reads 0 "
            "and must not be trusted. Present only for saturated counters.",
            RDMA_LABELS + ("counter",),
        ),
        # Host
        _spec(
            "llm_host_cpu_utilization_ratio",
            "gauge",
            "Busy fraction of one logical CPU over the exporter's window (everything but idle and iowait).",
            HOST_CPU_LABELS,
        ),
        _spec(
            "llm_host_cpu_overall_utilization_ratio",
            "gauge",
            "Busy fraction of all logical CPUs together over the exporter's window.",
            (),
        ),
        _spec(
            "llm_host_memory_used_bytes",
            "gauge",
            "Memory in use: total minus available (what cannot be reclaimed without swapping).",
            (),
        ),
        _spec("llm_host_memory_total_bytes", "gauge", "Physical memory.", ()),
        _spec(
            "llm_engine_process_cpu_seconds_total",
            "counter",
            "CPU seconds (user + system) of the engine's serving process: its own process_cpu_seconds_total where it "
            "exports one, else its process tree found from the port it listens on (exited children keep counting).",
            ENGINE_LABELS,
        ),
        _spec("llm_engine_process_threads", "gauge", "Threads in the engine's process tree.", ENGINE_LABELS),
        # Diagnosis
        _spec(
            "llm_bottleneck_score",
            "gauge",
            "How strongly the evidence points at this stage as the bottleneck, 0-1.",
            ENGINE_LABELS + ("stage",),
        ),
        _spec(
            "llm_bottleneck_active",
            "gauge",
            "1 while the stage's score is past its threshold (with hysteresis).",
            ENGINE_LABELS + ("stage",),
        ),
        _spec(
            "llm_bottleneck_primary",
            "gauge",
            "One-hot over stage (including none): the engine's main bottleneck now.",
            ENGINE_LABELS + ("stage",),
        ),
        # Gateways (exporter/sources/gateway.py) and probes (exporter/sources/probe.py)
        _spec(
            "llm_gateway_up",
            "gauge",
            "1 if the last scrape of the gateway succeeded and parsed, else 0.",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_requests_total",
            "counter",
            "Responses the gateway sent, by status class (1xx-5xx); code carries 429, 499, 502, 503 or 504 where the "
            "gateway reports single codes, else it is empty.",
            GATEWAY_LABELS + ("code_class", "code"),
        ),
        _spec(
            "llm_gateway_request_duration_seconds",
            "summary",
            "Whole request as the gateway times it; quantiles over the exporter's window from the gateway's histogram.",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_time_to_first_token_seconds",
            "summary",
            "Time to first token as the gateway times it (its clock: docs/metrics.md); windowed quantiles.",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_upstream_duration_seconds",
            "summary",
            "Time the gateway waited on its upstream (the engine and the hop to it); windowed quantiles.",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_queue_time_seconds",
            "summary",
            "Time requests waited in the gateway's own queue; windowed quantiles.",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_average_seconds",
            "gauge",
            "A mean the gateway computes itself, by phase (request_duration, upstream_duration, queue_time); HAProxy: "
            "over each backend's last 1024 requests, the busiest backend's.",
            GATEWAY_LABELS + ("phase",),
        ),
        _spec("llm_gateway_requests_in_flight", "gauge", "Requests in flight through the gateway.", GATEWAY_LABELS),
        _spec("llm_gateway_requests_queued", "gauge", "Requests waiting in the gateway for a backend.", GATEWAY_LABELS),
        _spec("llm_gateway_connections_active", "gauge", "Client connections open at the gateway.", GATEWAY_LABELS),
        _spec(
            "llm_gateway_connections_limit",
            "gauge",
            "The most client connections the gateway accepts (HAProxy: the frontends' maxconn).",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_backends",
            "gauge",
            "Backends (servers, endpoints, deployments) the gateway routes to, by state (up, down).",
            GATEWAY_LABELS + ("state",),
        ),
        _spec(
            "llm_gateway_upstream_connection_errors_total",
            "counter",
            "Failed connections from the gateway to its backends.",
            GATEWAY_LABELS,
        ),
        _spec(
            "llm_gateway_latency_component_seconds",
            "gauge",
            "Mean latency of one part of the path over the diagnosis window, from means (never quantiles): "
            "client_to_gateway, gateway, gateway_to_engine, engine.",
            GATEWAY_LABELS + ("component",),
        ),
        _spec(
            "llm_gateway_bottleneck_score",
            "gauge",
            "How strongly the evidence points at this stage before the engine (docs/stages.md) for the path through "
            "the gateway, 0-1.",
            GATEWAY_LABELS + ("stage",),
        ),
        _spec(
            "llm_gateway_bottleneck_primary",
            "gauge",
            "One-hot over stage (the stages before the engine, and none): the path's main bottleneck before the "
            "engine.",
            GATEWAY_LABELS + ("stage",),
        ),
        _spec("llm_probe_up", "gauge", "1 if the probe's last request on this path succeeded, else 0.", PROBE_LABELS),
        _spec("llm_probe_success_total", "counter", "Probes that streamed a completion to its end.", PROBE_LABELS),
        _spec(
            "llm_probe_failures_total",
            "counter",
            "Failed probes by reason: connect, tls, http_status, timeout, malformed_stream.",
            PROBE_LABELS + ("reason",),
        ),
        _spec(
            "llm_probe_time_to_first_token_seconds",
            "summary",
            "Client-observed time to first token: request sent → first streamed token; quantiles over the window.",
            PROBE_LABELS,
        ),
        _spec(
            "llm_probe_e2e_latency_seconds",
            "summary",
            "Client-observed end-to-end time: request sent → stream complete; quantiles over the window.",
            PROBE_LABELS,
        ),
        # Latency SLOs (exporter/slo/, docs/slo.md)
        _spec(
            "llm_slo_objective_ratio",
            "gauge",
            "The SLO's objective: the fraction of events that must meet it.",
            SLO_LABELS,
        ),
        _spec(
            "llm_slo_threshold_seconds", "gauge", "The SLO's threshold for one dimension.", SLO_LABELS + ("dimension",)
        ),
        _spec(
            "llm_slo_attainment_ratio",
            "gauge",
            "Fraction of the window's events within the SLO threshold, a lower bound: counted at the largest bucket "
            "edge at or below the threshold. Events are requests (ttft, e2e) or inter-token gaps (itl).",
            SLO_SERIES_LABELS,
        ),
        _spec(
            "llm_slo_attainment_upper_bound_ratio",
            "gauge",
            "Upper bound of the same fraction, counted at the smallest bucket edge at or above the threshold; equal "
            "to llm_slo_attainment_ratio when the threshold is a bucket edge.",
            SLO_SERIES_LABELS,
        ),
        _spec(
            "llm_slo_goodput_requests_per_second",
            "gauge",
            "Requests per second within the SLO threshold over the window (the lower-bound attainment times the "
            "completed-request rate).",
            SLO_SERIES_LABELS,
        ),
        _spec(
            "llm_slo_events_total",
            "counter",
            "Events the SLO dimension judges (the engine histogram's count): the error-budget rules rate it.",
            SLO_SERIES_LABELS,
        ),
        _spec(
            "llm_slo_good_events_total",
            "counter",
            "Of those, events within the threshold (lower bound, at the largest bucket edge at or below it).",
            SLO_SERIES_LABELS,
        ),
        _spec(
            "llm_slo_joint_attainment_ratio",
            "gauge",
            "Fraction of the window's requests meeting every threshold of the SLO at once, from the engine's "
            "request spans (OTLP); as vLLM bench's --goodput counts good requests.",
            SLO_LABELS + ENGINE_LABELS,
        ),
        _spec(
            "llm_slo_joint_goodput_requests_per_second",
            "gauge",
            "Requests per second meeting every threshold of the SLO at once, from the engine's request spans.",
            SLO_LABELS + ENGINE_LABELS,
        ),
        # Per-request data from the engines' OTLP spans (exporter/slo/otlp.py)
        _spec(
            "llm_request_prompt_tokens",
            "summary",
            "Prompt tokens per request (the request mix), from the engine's request spans: quantiles over the "
            "window, cumulative count and sum.",
            ENGINE_LABELS,
        ),
        _spec(
            "llm_request_generation_tokens",
            "summary",
            "Output tokens per request (the request mix), from the engine's request spans.",
            ENGINE_LABELS,
        ),
        _spec(
            "llm_otlp_spans_total",
            "counter",
            "Spans the OTLP receiver got, by result: recorded (a request span), ignored (another span), "
            "rate_limited (over otlp.max_spans_per_second, dropped).",
            ("result",),
        ),
        _spec(
            "llm_otlp_payloads_total",
            "counter",
            "OTLP/HTTP export requests by result: ok, too_large (over otlp.max_body_bytes), bad_request, busy.",
            ("result",),
        ),
        # Capacity headroom (exporter/slo/headroom.py)
        _spec(
            "llm_capacity_max_request_rate",
            "gauge",
            "Estimated largest request rate (req/s) the engine can take at the current request mix while still "
            "meeting the SLO.",
            ENGINE_SERIES_LABELS + ("slo",),
        ),
        _spec(
            "llm_capacity_max_concurrency",
            "gauge",
            "Estimated largest number of running requests at which the SLO is still met.",
            ENGINE_SERIES_LABELS + ("slo",),
        ),
        _spec(
            "llm_capacity_headroom_ratio",
            "gauge",
            "1 - current request rate / llm_capacity_max_request_rate: the fraction of capacity still free under "
            "the SLO (negative when the SLO is already broken by load).",
            ENGINE_SERIES_LABELS + ("slo",),
        ),
        _spec(
            "llm_capacity_estimate_confidence_ratio",
            "gauge",
            "Confidence 0-1 in the capacity estimate: how much of it rests on the engine's own measured load points "
            "rather than on the model alone.",
            ENGINE_SERIES_LABELS + ("slo",),
        ),
        # The exporter itself
        _spec(
            "llm_exporter_source_up",
            "gauge",
            "1 if the source's last collection succeeded within its timeout.",
            SOURCE_LABELS,
        ),
        _spec(
            "llm_exporter_collect_duration_seconds",
            "gauge",
            "Wall time of the source's last collection.",
            SOURCE_LABELS,
        ),
        _spec(
            "llm_exporter_source_errors_total",
            "counter",
            "Failed collections by reason (timeout, connection, http_status, too_large, parse, cardinality, exception),"
            " and collections that succeeded but left part of their output out: cardinality (over a model or series"
            " budget; source exporter, target empty for the node-wide cap) or invalid_value (values that cannot be"
            " true, dropped).",
            SOURCE_LABELS + ("reason",),
        ),
        _spec(
            "llm_exporter_discovery_targets",
            "gauge",
            "Engine pods discovery found, by state: scraped, or dropped because more asked than kubernetes.max_engines"
            " (pods holding GPUs first, then round-robin across namespaces and owners).",
            ("state",),
        ),
        _spec(
            "llm_exporter_config_reloads_total",
            "counter",
            "Configuration reloads on SIGHUP by result (success, failure); a failed reload keeps the running "
            "configuration.",
            ("result",),
        ),
        _spec(
            "llm_exporter_build_info",
            "gauge",
            "Always 1; labels carry the exporter version and Python version.",
            ("version", "python_version"),
        ),
    )
}


def spec(name: str) -> MetricSpec:
    """The catalogue entry for a family; KeyError names the unknown family."""
    return CATALOGUE[name]
