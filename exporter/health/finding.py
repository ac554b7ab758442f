"""What a finding is, and how a stage quotes the ones that explain it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: what a finding is evidence for: the stages read the topics they can be explained by
NETWORK = "network"  # the cross-node communication and KV-transfer stages
GPU_LINK = "gpu_link"  # a GPU's own links (PCIe, NVLink): every GPU-bound stage, and KV transfer
HOST = "host"  # the host-overhead stage: pauses, throttling, steal, jitter
STARTUP = "startup"  # an engine loading or warming up


@dataclass(frozen=True)
class Finding:
    """One fact that is wrong on the node now, with the figure that shows it."""

    #: the kind's id (exporter/health/kinds/): the `kind` label of `llm_health_finding`
    kind: str
    topic: str
    #: what it is about: "mlx5_0", "mlx5_0/1", "GPU 3", an engine name
    device: str
    #: one line with the figures ("PCIe Gen4 x8, trained below its Gen4 x16")
    text: str
    #: the file or counter it came from ("…/current_link_width", "counters/link_downed")
    source: str
    #: the figure the gauge carries (a width, a rate, a ratio)
    value: float = 1.0
    #: set for findings about one engine (its GC, its cgroup): only that engine's stages quote them
    engine: str = ""

    def line(self) -> str:
        return f"{self.device}: {self.text} ({self.source})"

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"kind": self.kind, "topic": self.topic, "device": self.device, "text": self.text}
        found |= {"source": self.source, "value": round(self.value, 4)}
        return found | ({"engine": self.engine} if self.engine else {})


def lines_for(findings: Iterable[Finding], topics: Iterable[str]) -> list[str]:
    """The evidence lines a stage quotes: the findings of `topics` among an engine's (the node's,
    and its own: the diagnosis hands each engine only those, `History.findings`)."""
    wanted = set(topics)
    return [f"{'engine' if f.engine else 'node'} finding: {f.line()}" for f in findings if f.topic in wanted]
