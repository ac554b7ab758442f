"""Disaggregated serving in a scenario: the `disaggregation:` key, replica roles, per-role expectations.

A scenario with `disaggregation:` serves prefill and decode pools instead of monolithic replicas:
every replica group says `role: prefill` or `role: decode`; a request is prefilled by the prefill
pool (as vLLM's P/D proxy sends it there with `max_tokens: 1`), its KV cache is then pulled by the
least-loaded decode replica over NVLink (`placement: same-node`) or over the decode GPU's RDMA NIC
(`cross-node`: the prefill peers sit on another node, whose half of the traffic mirrors ours), and
decoded there. `format` picks the text the engines speak: vLLM with the NIXL connector, or SGLang's
PD disaggregation. A phase may move the pair (`disaggregation: {placement: ...}`) and may expect a
different stage per role (`expected_by_role: {prefill: none}`): a decode worker can be transfer-bound
while its prefill peers are healthy.

Link figures: NVLink 4 moves 450 GB/s per direction on an H100 (900 GB/s both ways, hardware.py),
an RDMA NIC its line rate; a KV read reaches about 80 % of NVLink and 90 % of a NIC (NIXL/UCX
bulk reads), which makes a transfer across nodes about 8x slower than within one (the framework's
"cross-node communication 8x slower than within a node").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from exporter import validation as v
from exporter.validation import ConfigError

ROLES = ("prefill", "decode")
FORMATS = ("vllm-nixl", "sglang")
PLACEMENTS = ("same-node", "cross-node")
DISAGGREGATION_KEYS = ("format", "placement", "nvlink_efficiency", "rdma_efficiency", "transfer_setup_ms")
PHASE_DISAGGREGATION_KEYS = ("placement",)


@dataclass(frozen=True)
class Disaggregation:
    """How the pools hand requests over, and over what."""

    format: str = "vllm-nixl"
    placement: str = "same-node"
    nvlink_efficiency: float = 0.8
    rdma_efficiency: float = 0.9
    #: per transfer: the handshake, posting the descriptors and the completion notification
    transfer_setup_seconds: float = 0.001

    @property
    def engine_type(self) -> str:
        """The exporter's engine type for this format (what `--engine TYPE=URL` names)."""
        return "sglang" if self.format == "sglang" else "vllm"

    @property
    def cross_node(self) -> bool:
        return self.placement == "cross-node"


def parse_disaggregation(value: Any) -> Disaggregation | None:
    if value is None:
        return None
    data = v.section(value, "disaggregation", DISAGGREGATION_KEYS)
    base = Disaggregation()
    return Disaggregation(
        format=v.choice(data.get("format", base.format), "disaggregation.format", FORMATS),
        placement=v.choice(data.get("placement", base.placement), "disaggregation.placement", PLACEMENTS),
        nvlink_efficiency=v.positive_number(
            data.get("nvlink_efficiency", base.nvlink_efficiency), "disaggregation.nvlink_efficiency", 1.0
        ),
        rdma_efficiency=v.positive_number(
            data.get("rdma_efficiency", base.rdma_efficiency), "disaggregation.rdma_efficiency", 1.0
        ),
        transfer_setup_seconds=v.non_negative(
            data.get("transfer_setup_ms", base.transfer_setup_seconds * 1000), "disaggregation.transfer_setup_ms"
        )
        / 1000.0,
    )


def phase_disaggregation(value: Any, where: str, current: Disaggregation | None) -> Disaggregation | None:
    """A phase's change of the pair's placement (cumulative, like every phase key)."""
    data = v.section(value, where, PHASE_DISAGGREGATION_KEYS)
    if not data:
        return current
    if current is None:
        raise ConfigError(where, "the scenario has no top-level disaggregation to change")
    return replace(
        current, placement=v.choice(data.get("placement", current.placement), f"{where}.placement", PLACEMENTS)
    )


def parse_role(value: Any, where: str) -> str:
    return "" if value is None else v.choice(value, where, ROLES)


def parse_expected_by_role(value: Any, where: str, stages: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    data = v.section(value, where, ROLES)
    return tuple((role, v.choice(stage, f"{where}.{role}", stages)) for role, stage in sorted(data.items()))


def check_roles(roles: list[str], disaggregation: Disaggregation | None, arrival: str) -> None:
    """Roles and the `disaggregation:` key go together: both pools, and only with it."""
    if disaggregation is None:
        for i, role in enumerate(roles):
            if role:
                raise ConfigError(f"replicas[{i}].role", "only with a top-level disaggregation section")
        return
    for i, role in enumerate(roles):
        if not role:
            raise ConfigError(f"replicas[{i}].role", "every replica group needs prefill or decode with disaggregation")
    missing = [role for role in ROLES if role not in roles]
    if missing:
        raise ConfigError("replicas", f"disaggregation needs a {missing[0]} group")
    if arrival == "closed":
        raise ConfigError("workload.arrival", "disaggregated scenarios take open arrivals (poisson or gamma)")


def expected_text(stage: str, by_role: tuple[tuple[str, str], ...]) -> str:
    """A phase's expectation as `--list` and the demo show it: "kv_transfer (prefill: none)"."""
    roles = ", ".join(f"{role}: {role_stage}" for role, role_stage in by_role)
    return f"{stage} ({roles})" if roles else stage
