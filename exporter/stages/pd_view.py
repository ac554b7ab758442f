"""One engine's place in a disaggregated pair, as the diagnosis works it out across engines each round.

A stage sees one engine's history; a hand-over is between two. The diagnosis
(exporter/diagnosis/pd.py) groups a node's engines by model and role, takes the time to first
token apart for every decode worker and the prefill pool that feeds it, checks which link the KV
bytes cross, and weighs the pools against each other; it leaves that here (`History.pd`) for the
stages to read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.catalogue.disagg import TTFT_PARTS

#: how each part is named in evidence
PART_TITLES = {
    "gateway_queue": "gateway queue",
    "prefill_queue": "prefill queue",
    "prefill_compute": "prefill compute",
    "decode_admission": "decode admission",
    "transfer_queue": "transfer queue",
    "transfer": "transfer",
    "first_decode_step": "first decode step",
    "unmeasured": "unmeasured",
}
#: the parts that are the hand-over itself (queue and wire)
TRANSFER_PARTS = ("transfer_queue", "transfer")


@dataclass
class LinkCheck:
    """Which link the KV bytes cross, from the decode side's byte rate against the node's links."""

    #: bytes per second the node's decode workers received by transfer over the window
    kv_rate: float | None = None
    rdma_receive_rate: float | None = None
    nvlink_receive_rate: float | None = None
    #: "rdma", "nvlink", or "" when the figures cannot tell
    over: str = ""
    #: the busiest receiving RDMA port ("mlx5_3/1"), its receive utilization and congestion per second
    port: str = ""
    port_utilization: float | None = None
    congestion_per_second: float | None = None
    link_rate: float | None = None

    def describe(self) -> str:
        """The link as evidence names it."""
        if self.over == "rdma":
            util = "" if self.port_utilization is None else f", receiving at {self.port_utilization:.0%}"
            rate = "" if self.link_rate is None else f" of {self.link_rate * 8 / 1e9:.0f} Gb/s"
            return f"RDMA port {self.port or '?'}{util}{rate}"
        if self.over == "nvlink":
            return "NVLink"
        return "an unmeasured link"


@dataclass
class PdView:
    """An engine of a disaggregated deployment, seen with its pool and its peers."""

    role: str
    model: str
    prefill_engines: list[str] = field(default_factory=list)
    decode_engines: list[str] = field(default_factory=list)
    #: mean seconds of each part of the time to first token (TTFT_PARTS); None: not measured
    parts: dict[str, float | None] = field(default_factory=dict)
    #: why a part reads as it does (SGLang's transfer includes its queue; no end-to-end TTFT)
    part_notes: list[str] = field(default_factory=list)
    link: LinkCheck = field(default_factory=LinkCheck)
    #: 0-1: how saturated each pool of the model is (the P:D balance)
    prefill_saturation: float | None = None
    decode_saturation: float | None = None
    #: the pool that starves the other, said in words, and its role ("" when balanced)
    balance: str = ""
    limiting_pool: str = ""

    @property
    def pair(self) -> str:
        """The pair as evidence names it: the prefill pool and the decode workers of the model."""
        prefill = ", ".join(self.prefill_engines) or "no prefill worker on this node"
        decode = ", ".join(self.decode_engines) or "no decode worker on this node"
        return f"prefill {prefill} -> decode {decode}"

    def part(self, name: str) -> float | None:
        return self.parts.get(name)

    @property
    def measured_ttft(self) -> float | None:
        """The parts' sum: the whole time to first token where an end-to-end figure was measured,
        else a lower bound of it."""
        values = [v for k, v in self.parts.items() if v is not None and k in TTFT_PARTS]
        return sum(values) if values else None

    @property
    def transfer_seconds(self) -> float | None:
        """Queue and wire of the hand-over, where either is measured."""
        values = [self.parts.get(p) for p in TRANSFER_PARTS]
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    def parts_line(self) -> str:
        """ "prefill queue 2 ms + prefill compute 91 ms + ... = 245 ms" for the evidence."""
        shown = [f"{PART_TITLES[k]} {v * 1000:.0f} ms" for k in TTFT_PARTS if (v := self.parts.get(k)) is not None]
        total = self.measured_ttft
        unmeasured = [PART_TITLES[k] for k in TTFT_PARTS if self.parts.get(k) is None and k != "unmeasured"]
        text = " + ".join(shown) + (f" = {total * 1000:.0f} ms" if total is not None else "")
        return text + (f" (not measured: {', '.join(unmeasured)})" if unmeasured else "")
