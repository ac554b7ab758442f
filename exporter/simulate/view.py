"""The demo's reading of the exporter's own /metrics: the key signals, for the screen (frame.py).

It reads only the exporter's normalized families (never the simulator's), so what the demo shows is
what Prometheus and the alerts would see: per engine running, waiting, KV usage, TTFT and ITL p95
(and the primary bottleneck stage once diagnosis gauges are present); per GPU SM and DRAM active;
per RDMA port transmit and receive utilization.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class ExporterReading:
    engines: dict[str, dict[str, float | str]] = field(default_factory=dict)
    gpus: dict[str, dict[str, float | str]] = field(default_factory=dict)
    ports: dict[str, dict[str, float]] = field(default_factory=dict)


_ENGINE_GAUGES = {
    "llm_engine_up": "up",  # an engine whose last scrape failed keeps its row, marked down
    "llm_engine_requests_running": "running",
    "llm_engine_requests_waiting": "waiting",
    "llm_engine_kv_cache_usage_ratio": "kv",
}
_ENGINE_P95 = {
    "llm_engine_time_to_first_token_seconds": "ttft_p95",
    "llm_engine_inter_token_latency_seconds": "itl_p95",
}
_GPU_GAUGES = {"llm_gpu_sm_active_ratio": "sm", "llm_gpu_dram_active_ratio": "dram"}
_PORT_GAUGES = {"llm_rdma_port_transmit_utilization_ratio": "tx", "llm_rdma_port_receive_utilization_ratio": "rx"}


def parse_exporter_metrics(text: str) -> ExporterReading:
    reading = ExporterReading()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name in _ENGINE_GAUGES:
                reading.engines.setdefault(labels.get("engine", "?"), {})[_ENGINE_GAUGES[sample.name]] = sample.value
            elif sample.name in _ENGINE_P95 and labels.get("quantile") == "0.95":
                reading.engines.setdefault(labels.get("engine", "?"), {})[_ENGINE_P95[sample.name]] = sample.value
            elif sample.name == "llm_bottleneck_primary" and sample.value == 1:
                reading.engines.setdefault(labels.get("engine", "?"), {})["primary"] = labels.get("stage", "")
            elif sample.name in _GPU_GAUGES:
                gpu = reading.gpus.setdefault(labels.get("gpu", "?"), {})
                gpu[_GPU_GAUGES[sample.name]] = sample.value
                gpu["engine"] = labels.get("engine", "")
            elif sample.name in _PORT_GAUGES:
                port = f"{labels.get('device', '?')}/{labels.get('port', '?')}"
                reading.ports.setdefault(port, {})[_PORT_GAUGES[sample.name]] = sample.value
    return reading


def natural_key(text: str) -> tuple:
    """Sort key that puts engine-10 after engine-9 and mlx5_10/1 after mlx5_9/1."""
    head = text.rstrip("0123456789/")
    digits = "".join(ch for ch in text[len(head) :] if ch.isdigit())
    return (head, int(digits) if digits else -1, text)
