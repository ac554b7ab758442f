"""Prefill and decode replicas: vLLM V1's scheduler (engine.py) with a KV hand-over between them.

The order of events follows vLLM's NIXL pull flow (vllm/distributed/kv_transfer/kv_connector/v1/
nixl, 0.32.0): the P/D proxy sends the prompt to a prefill replica with `max_tokens: 1`; when that
request finishes its blocks are not freed but held for the decode side (`delay_free_blocks`); the
proxy then sends the request to a decode replica, whose scheduler allocates blocks for the whole
prompt before it can read anything (a full decode pool stops hand-overs there: the request waits
for capacity), parks it in WAITING_FOR_REMOTE_KVS while the read runs (`deferred` in
`num_requests_waiting_by_reason`, counted in `num_requests_waiting`), and schedules it once the KV
has arrived: its first step computes the last prompt token (the connector loads all but one) and
samples the first token. The read done, the prefill replica frees the held blocks.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from exporter.simulate import ledger
from exporter.simulate.engine import EngineReplica, Scheduled
from exporter.simulate.network import NetworkCondition, RdmaPort
from exporter.simulate.pd_link import KvIngress, Transfer
from exporter.simulate.pd_spec import Disaggregation
from exporter.simulate.pd_stats import BOOTSTRAP_SECONDS, PdStats
from exporter.simulate.workload import Request

#: what a hand-over sees at this moment: how the pools are placed, and the fabric's condition
Conditions = Callable[[], tuple[Disaggregation, NetworkCondition]]


class PrefillReplica(EngineReplica):
    """Computes prompts; a finished request's KV stays in its pool until a decode replica has read it."""

    role = "prefill"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pd = PdStats("prefill")
        #: request id -> the finished prefill whose blocks a decode replica has not read yet
        self.held: dict[int, Request] = {}
        #: the node routes a finished prefill to a decode replica (pd_node.py)
        self.on_prefilled: Callable[[PrefillReplica, Request, float], None] = lambda *_: None
        #: the NIC its GPU sends over when a decode replica on another node reads its KV
        self.nic: RdmaPort | None = None

    def _finish(self, request: Request, at: float) -> None:
        self.held[request.id] = request
        self.pd.stage("prefill_waiting", request.first_scheduled - request.arrival - BOOTSTRAP_SECONDS)
        self.pd.stage("prefill_bootstrap", BOOTSTRAP_SECONDS)
        self.pd.stage("prefill_forward", request.first_token - request.first_scheduled)
        self._close(request, at, ledger.finished(self.stats, request, at, self.config.max_model_len))
        self.on_prefilled(self, request, at)

    def release(self, request: Request, transfer: Transfer) -> None:
        """The decode side has read the request's KV: free its blocks, record the send."""
        del self.held[request.id]
        self.kv.free(request.blocks)
        if request.prefix_blocks:
            self.kv.release((request.prefix_group, request.prefix_tokens))
        request.blocks = request.prefix_blocks = 0
        self.pd.sent(transfer.done - transfer.started, transfer.bytes)
        self.pd.stage("prefill_transfer_kv_cache", transfer.done - request.finished)


class DecodeReplica(EngineReplica):
    """Admits hand-overs when their whole prompt's blocks fit, reads their KV, then decodes them."""

    role = "decode"

    def __init__(self, *args: Any, ingress: KvIngress, conditions: Conditions, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pd = PdStats("decode")
        self.ingress = ingress
        self._conditions = conditions
        #: (done, sequence, transfer, request) of reads on their way, soonest first
        self.fetching: list[tuple[float, int, Transfer, Request]] = []
        #: requests whose KV has arrived, waiting for their first step
        self.arrived: deque[Request] = deque()
        #: decode request id -> (the prefill replica holding its KV, that replica's request)
        self.origin: dict[int, tuple[PrefillReplica, Request]] = {}
        #: decode request id -> when its KV arrived
        self._arrived_at: dict[int, float] = {}
        self._sequence = 0

    def hand_over(self, request: Request, prefill: PrefillReplica, prefilled: Request) -> None:
        self.origin[request.id] = (prefill, prefilled)
        request.replica = self.index
        # Hand-overs from several prefill replicas interleave in time: keep the inbox in order.
        index = bisect.bisect_right([r.arrival for r in self.inbox], request.arrival)
        self.inbox.insert(index, request)

    # -------------------------------------------------------------------------- engine hooks
    def _has_work(self) -> bool:
        return bool(self.running or self.waiting or self.arrived)

    def _next_wake(self) -> float:
        wake = super()._next_wake()
        return min(wake, self.fetching[0][0]) if self.fetching else wake

    def _horizon(self, end: float) -> float:
        """No run of steps past a read's arrival; none at all while a request waits to join."""
        if self.arrived:
            return self.now
        return min(end, self.fetching[0][0]) if self.fetching else end

    def _accept_arrivals(self) -> None:
        super()._accept_arrivals()
        while self.fetching and self.fetching[0][0] <= self.now:
            _, _, transfer, request = heapq.heappop(self.fetching)
            self._received(transfer, request)

    def _admission(self, request: Request, budget: int) -> tuple[int, int, int] | None:
        """A hand-over needs blocks for its whole prompt before its KV can be read (a request
        preempted after its read, for everything it recomputes)."""
        kv = self.kv
        blocks = kv.blocks_for(request.prompt_tokens if request.id in self.origin else request.tokens)
        watermark = int(self.config.kv_watermark * kv.total_blocks) if self.running else 0
        return (0, 0, blocks) if blocks + watermark <= kv.free_blocks else None

    def _admit(self, budget: int, scheduled: Scheduled) -> None:
        cfg = self.config
        while self.arrived and len(self.running) < cfg.max_num_seqs and budget > 0:
            request = self.arrived.popleft()
            request.computed = request.prompt_tokens - 1  # the connector loads all but the last token
            request.first_scheduled = self.now
            self.stats.observe("request_queue_time_seconds", self.now - request.arrival)
            self.pd.stage("decode_waiting", self.now - self._arrived_at.pop(request.id))
            self.running.append(request)
            scheduled.append((request, 1, False))
            budget -= 1
        while self.waiting and len(self.running) + len(self.fetching) + len(self.arrived) < cfg.max_num_seqs:
            request = self.waiting.peek()
            plan = self._admission(request, budget)
            if plan is None or (request.id not in self.origin and budget <= 0):
                return
            self.waiting.pop()
            self.kv.allocate(plan[2])
            request.blocks = plan[2]
            if request.id in self.origin:
                self._read(request)
            else:  # preempted after its read: its KV is gone, so it is recomputed here (vLLM's default)
                tokens = min(request.tokens, budget)
                self.running.append(request)
                scheduled.append((request, tokens, False))
                budget -= tokens

    # ------------------------------------------------------------------------------ hand-over
    def _read(self, request: Request) -> None:
        how, condition = self._conditions()
        prefill, _ = self.origin[request.id]
        nbytes = float(request.prompt_tokens * self.model.kv_bytes_per_token)
        transfer = self.ingress.read(self.now, nbytes, how, condition, prefill.gpus[0], prefill.nic)
        self.pd.stage("decode_prepare", self.now - request.arrival)
        self.pd.stage("decode_bootstrap", BOOTSTRAP_SECONDS)
        self.pd.observe("kv_transfer_alloc_ms", (self.now - request.arrival) * 1000.0)
        self.pd.observe("kv_transfer_bootstrap_ms", BOOTSTRAP_SECONDS * 1000.0)
        self._sequence += 1
        heapq.heappush(self.fetching, (transfer.done, self._sequence, transfer, request))

    def _received(self, transfer: Transfer, request: Request) -> None:
        self.ingress.complete(transfer)
        prefill, prefilled = self.origin.pop(request.id)
        prefill.release(prefilled, transfer)
        descriptors = self.kv.blocks_for(request.prompt_tokens) * self.model.layers
        self.pd.read(transfer.done - transfer.started, transfer.bytes, descriptors)
        self.pd.stage("decode_transferred", transfer.done - transfer.requested)
        self._arrived_at[request.id] = transfer.done
        request.cached_tokens = request.prompt_tokens - 1  # counted as read from the peer (pd_text.py)
        self.arrived.append(request)

    # ------------------------------------------------------------------------------ gauges
    def transfer_stages(self) -> dict[str, int]:
        """vLLM's `num_requests_kv_fetch_by_stage`: reads queued, on the wire, done but not running."""
        queued = sum(1 for _, _, transfer, _ in self.fetching if transfer.started > self.now)
        return {
            "waiting_to_start": queued,
            "in_progress": len(self.fetching) - queued,
            "completed_waiting": len(self.arrived),
        }

    @property
    def deferred(self) -> int:
        """Requests parked for their KV (vLLM's `deferred` waiting reason)."""
        return len(self.fetching) + len(self.arrived)

    @property
    def load(self) -> int:
        return super().load + self.deferred
