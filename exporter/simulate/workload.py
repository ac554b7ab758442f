"""Requests and how they arrive: Poisson or Gamma-bursty arrivals, heavy-tailed lengths, shared prefixes.

Why these shapes (shared/research/diagnosis-method.md §2 items 5-6): vLLM bench and Vidur draw
Poisson arrivals, and Gamma inter-arrivals with shape 1/CV² for bursts (CV > 1). A closed
population (`closedloop.py`) is the other kind of load: a fixed number of clients, each waiting for
its answer and thinking before it asks again, as editors asking for completions do. Prompt and output
lengths are heavy-tailed, so they are lognormal here with a given mean and coefficient of
variation, clamped to [min, max]. A shared prefix (a prompt template, a system prompt) is the same
first tokens for every request of a prefix group: what prefix caching can reuse.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LengthSpec:
    """A lognormal token count with the given mean and coefficient of variation, clamped."""

    mean: float
    cv: float = 0.5
    min: int = 1
    max: int = 1_000_000

    def sample(self, rng: random.Random) -> int:
        if self.cv <= 0:
            value = self.mean
        else:
            sigma2 = math.log1p(self.cv * self.cv)
            value = rng.lognormvariate(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2))
        return int(min(self.max, max(self.min, round(value))))


@dataclass(frozen=True)
class WorkloadSpec:
    """The offered load of one phase, node-wide (the router spreads it over the replicas)."""

    rate_per_second: float  # open arrivals; a closed population's rate follows from its latency
    prompt_tokens: LengthSpec
    output_tokens: LengthSpec
    arrival: str = "poisson"  # or "gamma", or "closed" (a population of `clients`)
    burstiness_cv: float = 1.0  # Gamma inter-arrival CV; > 1 is bursty
    shared_prefix_ratio: float = 0.0  # fraction of the mean prompt that is a shared prefix
    prefix_groups: int = 1  # distinct shared prefixes (templates)
    max_tokens: int | None = None  # the client's max_tokens; None: up to max_model_len
    client_timeout_seconds: float | None = None  # clients give up on requests still queued
    clients: int = 0  # closed: the population, node-wide
    think_seconds: float = 0.0  # closed: mean time between an answer and the client's next request

    @property
    def shared_prefix_tokens(self) -> int:
        return int(self.shared_prefix_ratio * self.prompt_tokens.mean)


@dataclass(slots=True, eq=False)
class Request:
    """One request and its life in an engine (times are simulated seconds; -1 = not yet)."""

    id: int
    arrival: float
    prompt_tokens: int
    output_tokens: int  # what it will generate if nothing truncates it
    max_tokens: int | None
    prefix_group: int  # -1: no shared prefix
    prefix_tokens: int
    target_tokens: int = 0  # output tokens after max_tokens / max_model_len truncation
    computed: int = 0  # tokens whose KV is in the cache
    generated: int = 0
    blocks: int = 0  # private KV blocks held
    prefix_blocks: int = 0  # shared prefix-cache blocks referenced
    swa_tokens: int = 0  # sliding-window pool slots held (hybrid models on SGLang)
    cached_tokens: int = 0  # prefix-cache hit at the first scheduling
    first_scheduled: float = -1.0
    first_token: float = -1.0
    last_token: float = -1.0
    finished: float = -1.0
    preemptions: int = 0
    finish_reason: str = ""  # stop, length, abort, error, or "rejected" (never reached the engine)
    replica: int = -1
    deadline: float = math.inf  # the client gives up if still queued then

    @property
    def tokens(self) -> int:
        """Tokens that must have KV before the next token can be sampled."""
        return self.prompt_tokens + self.generated

    @property
    def done(self) -> bool:
        return self.finished >= 0


@dataclass
class ArrivalProcess:
    """Draws requests in arrival order; the workload in force is looked up at each arrival time."""

    workload_at: Callable[[float], WorkloadSpec]
    boundaries: tuple[float, ...]  # times where the workload changes
    rng: random.Random
    stopped: bool = False  # no more arrivals (a drain)
    _last: float = 0.0  # time of the last arrival drawn: the next gap starts there
    _next_id: int = 0
    _pending: Request | None = field(default=None, repr=False)

    def until(self, end: float) -> list[Request]:
        """Every request arriving up to `end` not returned before, in order."""
        arrivals: list[Request] = []
        while not self.stopped:
            if self._pending is None:
                self._pending = self._draw()
                if self._pending is None:
                    break
            if self._pending.arrival > end:
                break
            arrivals.append(self._pending)
            self._pending = None
        return arrivals

    def _draw(self) -> Request | None:
        t = self._last
        for _ in range(len(self.boundaries) + 2):
            spec = self.workload_at(t)
            boundary = min((b for b in self.boundaries if b > t), default=math.inf)
            gap = self._gap(spec)
            if t + gap < boundary:
                self._last = t + gap
                return self._request(spec, self._last)
            # The rate changes before this arrival: draw again from the boundary (memoryless for
            # Poisson, a close approximation for Gamma).
            if math.isinf(boundary):
                return None
            t = boundary
        return None

    def _gap(self, spec: WorkloadSpec) -> float:
        if spec.rate_per_second <= 0:
            return math.inf
        if spec.arrival == "gamma" and spec.burstiness_cv > 0:
            shape = 1.0 / (spec.burstiness_cv**2)
            return self.rng.gammavariate(shape, 1.0 / (spec.rate_per_second * shape))
        return self.rng.expovariate(spec.rate_per_second)

    def _request(self, spec: WorkloadSpec, at: float) -> Request:
        self._next_id += 1
        return draw_request(spec, at, self._next_id, self.rng)


def draw_request(spec: WorkloadSpec, at: float, request_id: int, rng: random.Random) -> Request:
    """One request of `spec` arriving at `at`: its prompt (a shared prefix and a part of its own),
    its answer length and its client's deadline; open and closed arrivals draw them alike."""
    prefix = spec.shared_prefix_tokens
    group = -1
    if prefix > 0:
        # The template plus a part of its own, drawn with the remaining mean and the same CV,
        # so the mean prompt stays `prompt_tokens.mean`.
        group = rng.randrange(max(1, spec.prefix_groups))
        lengths = spec.prompt_tokens
        unique = LengthSpec(lengths.mean - prefix, lengths.cv, 1, max(1, lengths.max - prefix))
        prompt = prefix + unique.sample(rng)
    else:
        prompt = spec.prompt_tokens.sample(rng)
    return Request(
        id=request_id,
        arrival=at,
        prompt_tokens=prompt,
        output_tokens=spec.output_tokens.sample(rng),
        max_tokens=spec.max_tokens,
        prefix_group=group,
        prefix_tokens=prefix if group >= 0 else 0,
        deadline=at + spec.client_timeout_seconds if spec.client_timeout_seconds else math.inf,
    )
