"""Fast-forward over runs of pure decode: what makes minutes of simulated serving take seconds of CPU.

When every running request is decoding, no queued request can be admitted (the queue is empty, or
its head cannot fit and will not while blocks only get scarcer), no request finishes and the free
blocks cover the growth, k steps in a row are identical but for one more token of context each.
Step time is linear in the context, so k steps cost k times the middle step (exact while the step
stays on the same side of the roofline's ridge).
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Protocol

from exporter.simulate.roofline import StepWork

if TYPE_CHECKING:
    from exporter.simulate.engine_config import EngineConfig
    from exporter.simulate.kvcache import KvCache, SlidingWindowPool
    from exporter.simulate.roofline import StepCost
    from exporter.simulate.stats import EngineStats
    from exporter.simulate.waitqueue import WaitQueue
    from exporter.simulate.workload import Request


class _Engine(Protocol):
    """What the mixin reads and calls on its host (EngineReplica): its state and its step helpers."""

    config: EngineConfig
    now: float
    inbox: deque[Request]
    waiting: WaitQueue
    running: list[Request]
    kv: KvCache
    swa: SlidingWindowPool | None
    stats: EngineStats

    def _admission(self, request: Request, budget: int) -> tuple[int, int, int] | None: ...
    def _cascade_savings(self, requests: list[Request]) -> float: ...
    def _cost(self, work: StepWork) -> StepCost: ...
    def _account(self, work: StepWork, steps: int) -> StepCost: ...
    def _finish(self, request: Request, at: float) -> None: ...
    def _blocks_needed(self, k: int) -> int: ...
    def _fits(self, k: int) -> bool: ...
    def _steps_within_free_blocks(self, k: int) -> int: ...


class FastForward:
    """Mixed into EngineReplica; uses its state and its step helpers (declared by _Engine)."""

    def _macro_step(self: _Engine, horizon: float) -> bool:
        """Advance k > 1 pure-decode steps at once when nothing can change in between."""
        running, cfg = self.running, self.config
        batch = len(running)
        if batch == 0 or batch > cfg.max_num_batched_tokens:
            return False
        context = 0
        k = 1 << 30
        for r in running:
            if r.prompt_tokens + r.generated - r.computed != 1 or r.generated == 0:
                return False
            context += r.computed
            left = r.target_tokens - r.generated
            if left < k:
                k = left
        if (
            self.waiting
            and batch < cfg.max_num_seqs
            and self._admission(self.waiting.peek(), cfg.max_num_batched_tokens - batch) is not None
        ):
            return False  # the queue head may be admitted next step: take it one step at a time
        work = StepWork(batch, 0, context - self._cascade_savings(running), context + batch)
        estimate = self._cost(work).step_seconds
        k = min(k, int((horizon - self.now) / estimate))
        # A new arrival could be admitted mid-run if the queue is empty (or it may jump it: SJF).
        if self.inbox and batch < cfg.max_num_seqs and (not self.waiting or cfg.scheduling == "sjf"):
            k = min(k, math.ceil((self.inbox[0].arrival - self.now) / estimate))
        if k < 2:
            return False
        if not self._fits(k):
            k = self._steps_within_free_blocks(k)
            if k < 2:
                return False
        needed = self._blocks_needed(k)
        middle = (k - 1) / 2  # every context grows by one token a step: time the middle step
        work.kv_read_tokens += batch * middle
        work.attention_pairs += batch * middle
        cost = self._account(work, k)
        step = cost.step_seconds
        end = self.now + k * step
        self.kv.allocate(needed)
        size = self.kv.block_size
        alive = []
        for request in running:
            held = (request.computed + k + size - 1) // size - request.prefix_blocks
            if held > request.blocks:
                request.blocks = held
            request.computed += k
            request.generated += k
            request.last_token = end
            if self.swa is not None:
                self.swa.take(request, request.computed)
            if request.generated >= request.target_tokens:
                self._finish(request, end)
            else:
                alive.append(request)
        self.stats.generation_tokens += batch * k
        self.stats.observe("inter_token_latency_seconds", step, batch * k)
        self.running = alive
        self.now = end
        return True

    def _blocks_needed(self: _Engine, k: int) -> int:
        size = self.kv.block_size
        total = 0
        for r in self.running:
            want = (r.computed + k + size - 1) // size - r.blocks - r.prefix_blocks
            if want > 0:
                total += want
        return total

    def _fits(self: _Engine, k: int) -> bool:
        """Whether k more tokens for every running request fit the free KV blocks (and SWA slots)."""
        if self._blocks_needed(k) > self.kv.free_blocks:
            return False
        swa = self.swa
        return swa is None or sum(swa.growth(r, r.computed + k) for r in self.running) <= swa.free_tokens

    def _steps_within_free_blocks(self: _Engine, k: int) -> int:
        low, high = 1, k  # a single step is left to _step, which preempts if it must
        while high - low > 1:
            mid = (low + high) // 2
            if self._fits(mid):
                low = mid
            else:
                high = mid
        return low
