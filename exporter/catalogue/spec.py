"""What a catalogue entry is, the label names the families share, and how a section lists them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

MetricType = Literal["gauge", "counter", "summary"]

ENGINE_LABELS = ("engine", "engine_type", "model")
# Series of an engine found through Kubernetes discovery also carry its pod's labels; an engine of
# a disaggregated deployment its `role` (prefill, decode, encode; none on a unified engine).
ENGINE_SERIES_LABELS = ENGINE_LABELS + ("pod", "namespace", "container", "role")
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
SLO_LABELS = ("slo",)
#: an SLO's attainment is measured at an engine, a gateway or a probe (`measured_at`), with that
#: point's own labels
SLO_SERIES_LABELS = ENGINE_SERIES_LABELS + GATEWAY_LABELS + PROBE_LABELS + ("slo", "dimension", "measured_at")
PLANNER_LABELS = ("planner", "model")


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One exported family: its name, TYPE, HELP, and every label name its series may carry."""

    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]


def gauge(name: str, help_: str, *own_labels: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help_, own_labels)


def counter(name: str, help_: str, *own_labels: str) -> MetricSpec:
    return MetricSpec(name, "counter", help_, own_labels)


def summary(name: str, help_: str, *own_labels: str) -> MetricSpec:
    return MetricSpec(name, "summary", help_, own_labels)


def families(labels: tuple[str, ...], *members: MetricSpec) -> tuple[MetricSpec, ...]:
    """A section's families: the labels all their series carry come first, then each one's own."""
    return tuple(replace(member, labels=labels + member.labels) for member in members)
