"""The demo's terminal view: the key signals as the exporter's own /metrics reports them.

It reads only the exporter's normalized families (never the simulator's), so what it shows is
what Prometheus and the alerts would see: per engine running, waiting, KV usage, TTFT and ITL p95
(and the primary bottleneck stage once diagnosis gauges are present); per GPU SM and DRAM active;
per RDMA port transmit and receive utilization.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class ExporterReading:
    engines: dict[str, dict[str, float | str]] = field(default_factory=dict)
    gpus: dict[str, dict[str, float | str]] = field(default_factory=dict)
    ports: dict[str, dict[str, float]] = field(default_factory=dict)


_ENGINE_GAUGES = {
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


def _num(value: float | str | None, fmt: str, scale: float = 1.0) -> str:
    if not isinstance(value, (int, float)) or math.isnan(value):
        return "-"
    return format(value * scale, fmt)


def render_view(reading: ExporterReading, header: str) -> str:
    lines = [header, ""]
    lines.append(f"{'engine':28} {'running':>7} {'waiting':>7} {'KV':>5} {'TTFT p95':>9} {'ITL p95':>8}  primary stage")
    for name in sorted(reading.engines, key=_natural):
        e = reading.engines[name]
        lines.append(
            f"{name[:28]:28} {_num(e.get('running'), '.0f'):>7} {_num(e.get('waiting'), '.0f'):>7} "
            f"{_num(e.get('kv'), '.2f'):>5} {_num(e.get('ttft_p95'), '.3f'):>8}s "
            f"{_num(e.get('itl_p95'), '.1f', 1000):>6}ms"
            f"  {e.get('primary', '-')}"
        )
    if not reading.engines:
        lines.append("  (no engine samples yet)")
    lines.append("")
    lines.append(f"{'gpu':>4} {'SM active':>10} {'DRAM active':>12}  engine")
    for gpu in sorted(reading.gpus, key=_natural):
        g = reading.gpus[gpu]
        lines.append(
            f"{gpu:>4} {_num(g.get('sm'), '.2f'):>10} {_num(g.get('dram'), '.2f'):>12}  {g.get('engine') or '-'}"
        )
    if not reading.gpus:
        lines.append("  (no GPU samples)")
    lines.append("")
    lines.append(f"{'rdma port':>12} {'tx util':>8} {'rx util':>8}")
    for port in sorted(reading.ports, key=_natural):
        p = reading.ports[port]
        lines.append(f"{port:>12} {_num(p.get('tx'), '.2f'):>8} {_num(p.get('rx'), '.2f'):>8}")
    if not reading.ports:
        lines.append("  (no RDMA ports)")
    return "\n".join(lines) + "\n"


def _natural(text: str) -> tuple:
    head = text.rstrip("0123456789/")
    digits = "".join(ch for ch in text[len(head) :] if ch.isdigit())
    return (head, int(digits) if digits else -1, text)
