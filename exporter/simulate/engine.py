"""One engine replica: vLLM V1's scheduler over a paged KV cache, each step timed by the roofline.

The scheduling follows vllm/v1/core/sched/scheduler.py (research note §2 items 1-4, Sarathi [S4]):
every step has a token budget (`max_num_batched_tokens`); running requests are served first (one
token per decoding request, a chunk of the prompt for one still prefilling); when a running request
needs a KV block and none is free, the most recently admitted request (FCFS) or the longest job
(SJF) is preempted by recompute — its blocks are freed and it goes back to the queue, to prefill
prompt and generated tokens again later; only when nothing was preempted are waiting requests
admitted, up to `max_num_seqs`, each needing blocks for what it computes in the step. Without
chunked prefill a prompt must fit the whole budget at once.

Long runs of pure decode are advanced many steps at a time (fastforward.py).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from exporter.simulate import ledger
from exporter.simulate.engine_config import EngineConfig
from exporter.simulate.fastforward import FastForward
from exporter.simulate.gpu import GpuDevice
from exporter.simulate.hardware import GpuSpec, ModelSpec
from exporter.simulate.kvcache import KvCache, SlidingWindowPool, hybrid_pool_tokens
from exporter.simulate.network import NetworkCondition, RdmaPort
from exporter.simulate.roofline import GIB, LinkState, Parallelism, StepCost, StepWork, kv_pool_tokens, step_cost
from exporter.simulate.stats import EngineStats
from exporter.simulate.waitqueue import WaitQueue
from exporter.simulate.workload import Request

# vllm/v1/attention/backends/flash_attn.py `use_cascade_attention`: a prefix common to the whole
# batch is attended once (cascade) from 256 tokens and 8 requests up.
CASCADE_MIN_PREFIX_TOKENS = 256
CASCADE_MIN_REQUESTS = 8
IDLE_CPU_FRACTION = 0.02  # the engine core's busy loop while idle
TIMEOUT_SWEEP_SECONDS = 1.0

LinkProvider = Callable[[], tuple[LinkState, NetworkCondition]]
Scheduled = list[tuple[Request, int, bool]]  # (request, tokens this step, is a decode step)


class EngineReplica(FastForward):
    #: "prefill" or "decode" for a replica of a disaggregated pool (pd_engine.py), "" otherwise
    role = ""

    def __init__(
        self,
        index: int,
        model: ModelSpec,
        gpu: GpuSpec,
        parallel: Parallelism,
        config: EngineConfig,
        gpus: list[GpuDevice],
        ports: list[RdmaPort],
        link: LinkProvider,
        record: bool = False,
        engine_type: str = "vllm",
    ) -> None:
        self.index = index
        self.engine_type = engine_type
        self.model = model
        self.gpu = gpu
        self.parallel = parallel
        self.config = config = replace(config, max_model_len=config.max_model_len or model.max_position_embeddings)
        self.gpus = gpus
        self.ports = ports
        self._link = link
        pool = kv_pool_tokens(
            model, gpu, parallel.tensor_parallel, config.gpu_memory_utilization, config.activation_reserve_gib * GIB
        )
        # A hybrid model on SGLang keeps its sliding-window layers' KV in a pool of their own.
        self.swa: SlidingWindowPool | None = None
        if engine_type == "sglang" and model.hybrid:
            pool, swa_tokens = hybrid_pool_tokens(model, pool, config.swa_full_tokens_ratio)
            self.swa = SlidingWindowPool(swa_tokens, model.sliding_window)
        self.kv = KvCache(pool // config.block_size, config.block_size)
        self.stats = EngineStats(config.max_model_len, engine_type)
        self.now = 0.0
        #: when its process started (simulated seconds; before 0: it was serving when the scenario began)
        self.started_at = 0.0
        self.inbox: deque[Request] = deque()
        self.waiting = WaitQueue(config.scheduling)
        self.running: list[Request] = []
        self.finished: list[Request] | None = [] if record else None
        # Called with each request that leaves (answered, refused, abandoned): a closed population's
        # client thinks and asks again (closedloop.py).
        self.on_close: Callable[[Request, float], None] | None = None
        self._next_sweep = 0.0
        for device in gpus:
            device.engine = index
        self._hold_memory()

    # ----------------------------------------------------------------- interface used by the node
    def reconfigure(self, **changes: Any) -> None:
        """Apply a phase's runtime changes (new flags after a rolling update; the KV pool stays).

        The values are EngineConfig fields of mixed types (Phase.engine_changes, checked against
        RUNTIME_KEYS and the field types when the scenario is loaded), hence Any.
        """
        config = replace(self.config, **changes)
        if not config.max_model_len:
            config = replace(config, max_model_len=self.model.max_position_embeddings)
        if config.scheduling != self.waiting.policy:
            self.waiting = self.waiting.with_policy(config.scheduling)
        self.config = config
        self._hold_memory()

    def _hold_memory(self) -> None:
        """Device memory the engine holds: its share when awake; asleep, the KV cache is released
        and the weights are offloaded (level 1) or dropped (level 2), a little context remains."""
        share = self.config.gpu_memory_utilization if not self.config.sleep_level else 0.02
        for device in self.gpus:
            device.memory_used_bytes = int(self.gpu.hbm_bytes * share)

    @property
    def asleep(self) -> bool:
        return self.config.sleep_level > 0

    def submit(self, request: Request) -> None:
        request.replica = self.index
        self.inbox.append(request)

    @property
    def load(self) -> int:
        return len(self.running) + len(self.waiting) + len(self.inbox)

    def run_until(self, end: float) -> None:
        while self.now < end:
            self._accept_arrivals()
            if self.now >= self._next_sweep:
                self._sweep_timeouts()
            if not self._has_work():
                idle_until = min(end, self._next_wake())
                self.stats.cpu_seconds += max(0.0, idle_until - self.now) * IDLE_CPU_FRACTION
                self.now = max(self.now, idle_until)
                if self._next_wake() > end:
                    break
                continue
            if not self._macro_step(self._horizon(end)):
                self._step()
        self._accept_arrivals()

    # Hooks a disaggregated replica (pd_engine.py) extends: work that is neither running nor
    # queued (KV on its way), and the next time something arrives without a step.
    def _has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def _next_wake(self) -> float:
        return self.inbox[0].arrival if self.inbox else math.inf

    def _horizon(self, end: float) -> float:
        return end

    # ------------------------------------------------------------------------------ admission
    def _accept_arrivals(self) -> None:
        while self.inbox and self.inbox[0].arrival <= self.now:
            request = self.inbox.popleft()
            limit = self.config.max_model_len
            if request.prompt_tokens >= limit or (
                request.max_tokens and request.prompt_tokens + request.max_tokens > limit
            ):
                self._close(request, request.arrival, "rejected")  # vLLM's API server answers 400
                continue
            queued = self.config.max_num_queued_reqs
            if queued and len(self.running) + len(self.waiting) >= queued:
                self._close(request, request.arrival, "refused")  # vLLM's API server answers 503
                continue
            room = limit - request.prompt_tokens
            request.target_tokens = max(1, min(request.output_tokens, request.max_tokens or room, room))
            self.waiting.push(request)

    def _sweep_timeouts(self) -> None:
        self._next_sweep = self.now + TIMEOUT_SWEEP_SECONDS
        for request in self.waiting.remove_if(lambda r: r.first_scheduled < 0 and r.deadline < self.now):
            self._close(request, self.now, "abort")

    def _admission(self, request: Request, budget: int) -> tuple[int, int, int] | None:
        """(cached blocks, tokens to compute now, new blocks) to admit `request`, None if it cannot be."""
        cfg, kv = self.config, self.kv
        cached_blocks = 0
        key = (request.prefix_group, request.prefix_tokens)
        if cfg.enable_prefix_caching and request.prefix_group >= 0:
            cached_blocks = min(kv.cached_blocks(key), (request.prompt_tokens + request.generated - 1) // kv.block_size)
        cached = cached_blocks * kv.block_size
        need = request.prompt_tokens + request.generated - cached
        if need > budget and not cfg.chunked_prefill:
            return None
        n = min(need, budget)
        new_blocks = kv.blocks_for(cached + n) - cached_blocks
        held_free = kv.idle_blocks(key) if cached_blocks else 0
        # The watermark only protects running requests: an idle engine admits whatever fits.
        watermark = int(cfg.kv_watermark * kv.total_blocks) if self.running else 0
        if new_blocks + held_free + watermark > kv.free_blocks:
            return None
        swa = self.swa
        if (
            swa is not None
            and swa.growth(request, cached + n) + cfg.kv_watermark * swa.total_tokens * bool(self.running)
            > swa.free_tokens
        ):
            return None  # SGLang admits only while every pool has room (the watermark kept in each)
        return cached_blocks, n, new_blocks

    def _admit(self, budget: int, scheduled: Scheduled) -> None:
        cfg, kv = self.config, self.kv
        while len(self.waiting) and len(self.running) < cfg.max_num_seqs and budget > 0:
            request = self.waiting.peek()
            plan = self._admission(request, budget)
            if plan is None:
                if not self.running and kv.blocks_for(request.prompt_tokens + request.generated) > kv.total_blocks:
                    self.waiting.pop()
                    self._close(request, self.now, "error")  # can never fit: vLLM would refuse it too
                    continue
                return
            cached_blocks, n, new_blocks = plan
            self.waiting.pop()
            if cached_blocks:
                request.prefix_blocks = kv.acquire((request.prefix_group, request.prefix_tokens))
            kv.allocate(new_blocks)
            request.blocks = new_blocks
            request.computed = cached = cached_blocks * kv.block_size
            if self.swa is not None:
                self.swa.take(request, cached + n)
            if cfg.enable_prefix_caching:
                self.stats.prefix_queries += request.prompt_tokens + request.generated
                self.stats.prefix_hits += cached
            if request.first_scheduled < 0:
                request.first_scheduled = self.now
                request.cached_tokens = cached
                self.stats.observe("request_queue_time_seconds", self.now - request.arrival)
            self.running.append(request)
            scheduled.append((request, n, False))
            budget -= n

    # ----------------------------------------------------------------------------- scheduling
    def _step(self) -> None:
        cfg, kv = self.config, self.kv
        size = kv.block_size
        budget = cfg.max_num_batched_tokens
        scheduled: Scheduled = []
        preempted = False
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            request = running[i]
            computed = request.computed
            need = request.prompt_tokens + request.generated - computed
            if need > budget and not cfg.chunked_prefill:
                i += 1
                continue
            n = need if need < budget else budget
            want = (computed + n + size - 1) // size - request.blocks - request.prefix_blocks
            if want > 0 or self.swa is not None:
                lost = False
                while self._short_of(request, want, computed + n) and not lost:
                    victim = self._victim(i)
                    self._preempt(victim)
                    preempted = True
                    lost = victim is request
                if lost:
                    break
                if want > 0:
                    kv.allocate(want)
                    request.blocks += want
                if self.swa is not None:
                    self.swa.take(request, computed + n)
            scheduled.append((request, n, need == 1 and request.generated > 0))
            budget -= n
            i += 1
        if not preempted:
            self._admit(budget, scheduled)
        if not scheduled:
            # Nothing fits this step (every request waits for blocks): let a little time pass.
            self.now += 0.001
            return
        self._execute(scheduled)

    def _short_of(self, request: Request, blocks: int, context: int) -> bool:
        """Whether `request` cannot grow to `context` tokens (`blocks` more KV blocks) without a preemption."""
        if blocks > self.kv.free_blocks:
            return True
        return self.swa is not None and self.swa.growth(request, context) > self.swa.free_tokens

    def _victim(self, first_unscheduled: int) -> Request:
        candidates = self.running[first_unscheduled:]
        if self.config.scheduling == "sjf":
            return max(candidates, key=lambda r: (r.prompt_tokens, r.arrival))
        return candidates[-1]

    def _preempt(self, request: Request) -> None:
        self.kv.free(request.blocks)
        if request.prefix_blocks:
            self.kv.release((request.prefix_group, request.prefix_tokens))
        if self.swa is not None:
            self.swa.release(request)
        request.blocks = request.prefix_blocks = request.computed = 0
        request.preemptions += 1
        self.stats.preemptions += 1
        self.running.remove(request)
        self.waiting.push_front(request)

    # ------------------------------------------------------------------------------ execution
    def _work(self, scheduled: Scheduled) -> StepWork:
        decode = prefill = 0
        kv_read = pairs = 0.0
        for request, n, decoding in scheduled:
            computed = request.computed
            kv_read += computed
            if decoding:
                decode += 1
                pairs += computed + 1
            else:
                prefill += n
                pairs += n * (computed + n / 2)
        cfg = self.config
        if cfg.cascade_attention and cfg.enable_prefix_caching and len(scheduled) >= CASCADE_MIN_REQUESTS:
            kv_read -= self._cascade_savings([request for request, _, _ in scheduled])
        return StepWork(decode, prefill, kv_read, pairs)

    def _cascade_savings(self, requests: list[Request]) -> float:
        """Tokens of shared prefix not re-read because cascade attention reads them once."""
        cfg = self.config
        if not (cfg.cascade_attention and cfg.enable_prefix_caching) or len(requests) < CASCADE_MIN_REQUESTS:
            return 0.0
        first = requests[0]
        if first.prefix_blocks * self.kv.block_size < CASCADE_MIN_PREFIX_TOKENS:
            return 0.0
        group, tokens = first.prefix_group, first.prefix_tokens
        for request in requests:
            if not request.prefix_blocks or request.prefix_group != group or request.prefix_tokens != tokens:
                return 0.0
        return (len(requests) - 1) * first.prefix_blocks * self.kv.block_size

    def _execute(self, scheduled: Scheduled) -> None:
        cost = self._account(self._work(scheduled), 1)
        end = self.now + cost.step_seconds
        stats = self.stats
        gaps: dict[float, int] = {}  # inter-token gaps, grouped: most decoders share their last token time
        any_done = False
        sampled = 0
        for request, n, decoding in scheduled:
            if decoding:
                request.computed += 1
                last = request.last_token
                gaps[last] = gaps.get(last, 0) + 1
            else:
                request.computed += n
                if request.computed < request.prompt_tokens + request.generated:
                    continue  # a prefill chunk: no token sampled yet
                if request.first_token < 0:
                    ledger.first_token(stats, request, end)
                else:
                    last = request.last_token  # resumed after a preemption: the gap includes the wait
                    gaps[last] = gaps.get(last, 0) + 1
                if not request.prefix_blocks and request.prefix_group >= 0:
                    self._publish_prefix(request)
            request.generated += 1
            sampled += 1
            request.last_token = end
            if request.generated >= request.target_tokens:
                self._finish(request, end)
                any_done = True
        for last, count in gaps.items():
            stats.observe("inter_token_latency_seconds", end - last, count)
        stats.generation_tokens += sampled
        if any_done:
            self.running = [r for r in self.running if r.finished < 0]
        self.now = end

    # ---------------------------------------------------------------------------- bookkeeping
    def _cost(self, work: StepWork) -> StepCost:
        link, _ = self._link()
        return step_cost(self.model, self.gpu, self.parallel, self.config.efficiency, work, link)

    def _account(self, work: StepWork, steps: int) -> StepCost:
        """Time one step of `work`, and charge `steps` of it to the GPUs, NICs and counters."""
        link, condition = self._link()
        cost = step_cost(self.model, self.gpu, self.parallel, self.config.efficiency, work, link)
        tokens = work.decode_seqs + work.prefill_tokens
        for device in self.gpus:
            device.account(cost, steps, tokens)
        for port in self.ports:
            port.carry(
                cost.network_bytes * steps, cost.network_bytes * steps, cost.comm_stall_seconds * steps, condition
            )
        stats = self.stats
        stats.flops += cost.flops * steps
        stats.read_bytes += cost.hbm_bytes * steps
        stats.written_bytes += tokens * self.model.kv_bytes_per_token / self.parallel.tensor_parallel * steps
        stats.cpu_seconds += cost.host_seconds * steps
        stats.observe("iteration_tokens_total", tokens, steps)
        return cost

    def _publish_prefix(self, request: Request) -> None:
        """The first request to finish a shared prefix leaves its full blocks in the prefix cache."""
        if not self.config.enable_prefix_caching:
            return
        blocks = request.prefix_tokens // self.kv.block_size
        if (
            blocks
            and request.blocks >= blocks
            and self.kv.publish((request.prefix_group, request.prefix_tokens), blocks)
        ):
            request.blocks -= blocks
            request.prefix_blocks = blocks

    def _finish(self, request: Request, at: float) -> None:
        self.kv.free(request.blocks)
        if request.prefix_blocks:
            self.kv.release((request.prefix_group, request.prefix_tokens))
        if self.swa is not None:
            self.swa.release(request)
        request.blocks = request.prefix_blocks = 0
        self._close(request, at, ledger.finished(self.stats, request, at, self.config.max_model_len))

    def _close(self, request: Request, at: float, reason: str) -> None:
        ledger.closed(self.stats, request, at, reason, self.config.gc_collections_per_request)
        if self.finished is not None:
            self.finished.append(request)
        if self.on_close is not None:
            self.on_close(request, at)
