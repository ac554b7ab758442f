"""The P/D proxy of a disaggregated node: arrivals to the prefill pool, finished prefills to a decode replica.

As vLLM's P/D proxy (examples/online_serving/disaggregated_serving) and llm-d's routing sidecar do:
a request goes to a prefill replica first with `max_tokens: 1`; its answer says where its KV is;
the request then goes to a decode replica, which reads that KV and generates the answer. Prefill
replicas are picked as the scenario's routing says (least loaded, or in turn); the decode replica
is always the least loaded, counting the hand-overs it is reading.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Protocol

from exporter.simulate.engine import EngineReplica
from exporter.simulate.gpu import GpuDevice
from exporter.simulate.network import NetworkCondition, RdmaPort
from exporter.simulate.pd_engine import DecodeReplica, PrefillReplica
from exporter.simulate.pd_link import KvIngress
from exporter.simulate.pd_spec import Disaggregation
from exporter.simulate.pd_stats import SglangStats
from exporter.simulate.workload import Request


class _Node(Protocol):
    """What the proxy reads of its node (exporter/simulate/node.py)."""

    gpus: list[GpuDevice]
    ports: list[RdmaPort]

    @property
    def phase(self) -> Any: ...

    @property
    def scenario(self) -> Any: ...


class PdRouter:
    """Builds the pools' replicas for the node and moves each request from one pool to the other."""

    def __init__(self, node: _Node) -> None:
        self.node = node
        self.prefill: list[PrefillReplica] = []
        self.decode: list[DecodeReplica] = []
        self._turn: itertools.cycle[int] | None = None
        #: request id -> the client's own max_tokens and answer length, which the prefill leg replaces
        self._asked: dict[int, tuple[int | None, int]] = {}

    @property
    def how(self) -> Disaggregation:
        disaggregation = self.node.phase.disaggregation
        assert disaggregation is not None, "a disaggregated node's phases all carry their hand-over"
        return disaggregation

    def conditions(self) -> tuple[Disaggregation, NetworkCondition]:
        return self.how, self.node.phase.network

    def reset(self) -> None:
        self.prefill, self.decode, self._turn = [], [], None
        self._asked.clear()

    def replica(self, role: str, gpus: list[int], *args: Any, **kwargs: Any) -> EngineReplica:
        """A prefill or decode replica on `gpus` (one: tensor_parallel 1), wired to its NIC."""
        node = self.node
        port: RdmaPort | None = node.ports[gpus[0] % len(node.ports)] if node.ports else None
        replica: PrefillReplica | DecodeReplica
        if role == "prefill":
            replica = PrefillReplica(*args, **kwargs)
            replica.nic = port
            replica.on_prefilled = self._hand_over
            self.prefill.append(replica)
        else:
            ingress = KvIngress(node.gpus[gpus[0]], port)
            replica = DecodeReplica(*args, ingress=ingress, conditions=self.conditions, **kwargs)
            self.decode.append(replica)
        replica.engine_type = self.how.engine_type  # the pair's format: what its /metrics speaks
        if self.how.format == "sglang":
            replica.stats = SglangStats(replica.stats.max_model_len)
        return replica

    def route(self, request: Request) -> None:
        """A new request to a prefill replica, asking for one token (the proxy's first leg)."""
        if self.node.scenario.routing.policy == "least_loaded":
            target = min(self.prefill, key=lambda r: (r.load, r.index))
        else:
            if self._turn is None:
                self._turn = itertools.cycle(range(len(self.prefill)))
            target = self.prefill[next(self._turn)]
        self._asked[request.id] = (request.max_tokens, request.output_tokens)
        target.submit(replace(request, max_tokens=1, output_tokens=1))

    def _hand_over(self, prefill: PrefillReplica, prefilled: Request, at: float) -> None:
        """The prefill leg answered: the same request to the least-loaded decode replica, from now."""
        max_tokens, output_tokens = self._asked.pop(prefilled.id)
        request = replace(
            prefilled,
            arrival=at,
            prefix_group=-1,
            prefix_tokens=0,
            max_tokens=max_tokens,
            output_tokens=output_tokens,
            **_fresh(),
        )
        decode = min(self.decode, key=lambda r: (r.load, r.index))
        decode.hand_over(request, prefill, prefilled)


def _fresh() -> dict[str, Any]:
    """A request's per-engine state, as a replica has not seen it yet."""
    return {
        "target_tokens": 0,
        "computed": 0,
        "generated": 0,
        "blocks": 0,
        "prefix_blocks": 0,
        "cached_tokens": 0,
        "first_scheduled": -1.0,
        "first_token": -1.0,
        "last_token": -1.0,
        "finished": -1.0,
        "preemptions": 0,
        "finish_reason": "",
        "replica": -1,
    }
