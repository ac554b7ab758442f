"""A closed population of clients: each sends one request, waits for its answer, thinks, sends again.

Why a closed model besides open (Poisson, Gamma) arrivals: an editor asking for code completions
has at most one request in flight and asks again a moment after the last suggestion came back, so
the load a service sees falls when its latency rises. That is what makes throughput fall with a
slower engine instead of a queue growing without bound, and what caps the queue at the population
(Schroeder, Wierman and Harchol-Balter, "Open versus closed: a cautionary tale", NSDI 2006: the
same mean load gives very different latencies under the two models). Throughput follows the
response-time law X = N / (R + Z) for N clients, mean response time R and mean think time Z.

A request leaves (answered, refused, or given up on after `client_timeout_seconds`) through the
engine's close hook, which calls `left`; the client then thinks for an exponentially distributed
time of mean `think_seconds` before its next request. The population in force is the phase's
`clients`: added clients start thinking at the phase's start, removed ones stop after their request
in flight. The node routes arrivals a chunk at a time (0.25 s), so a think time that ends inside a
chunk already routed starts its request at the next chunk: latencies stay exact, think times are
at most a chunk longer.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from exporter.simulate.workload import Request, WorkloadSpec, draw_request


@dataclass
class ClosedPopulation:
    """The same interface as `ArrivalProcess` (`until`, `boundaries`, `stopped`), plus `left`."""

    workload_at: Callable[[float], WorkloadSpec]
    boundaries: tuple[float, ...]
    rng: random.Random
    stopped: bool = False
    _ready: list[tuple[float, int]] = field(default_factory=list)  # (next request's time, client), a heap
    _in_flight: dict[int, int] = field(default_factory=dict)  # request id -> client
    _members: set[int] = field(default_factory=set)  # clients in the population now
    _routed_until: float = 0.0  # arrivals up to here were handed out
    _applied_until: float = -1.0  # population changes up to here are applied
    _next_client: int = 0
    _next_id: int = 0

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def population(self) -> int:
        return len(self._members)

    def until(self, end: float) -> list[Request]:
        """Every request the clients send up to `end`, in order of time."""
        self._apply_population(end)
        arrivals: list[Request] = []
        while not self.stopped and self._ready and self._ready[0][0] <= end:
            at, client = heapq.heappop(self._ready)
            if client not in self._members:
                continue  # retired while it was thinking
            at = max(at, self._routed_until)
            self._next_id += 1
            request = draw_request(self.workload_at(at), at, self._next_id, self.rng)
            self._in_flight[request.id] = client
            arrivals.append(request)
        self._routed_until = max(self._routed_until, end)
        return arrivals

    def left(self, request: Request, at: float) -> None:
        """`request` was answered, refused or abandoned at `at`: its client thinks, then asks again."""
        client = self._in_flight.pop(request.id, None)
        if client is None or client not in self._members:
            return
        heapq.heappush(self._ready, (at + self._think(at), client))

    def _think(self, at: float) -> float:
        mean = self.workload_at(at).think_seconds
        return self.rng.expovariate(1.0 / mean) if mean > 0 else 0.0

    def _apply_population(self, end: float) -> None:
        """Grow or shrink the population to each phase's `clients`, at the phase's start."""
        times = [0.0] if self._applied_until < 0 else []
        times += [b for b in self.boundaries if self._applied_until < b <= end]
        for t in times:
            target = self.workload_at(t).clients
            while len(self._members) < target:
                self._next_client += 1
                self._members.add(self._next_client)
                heapq.heappush(self._ready, (t + self._think(t), self._next_client))
            if len(self._members) > target:
                # Thinking clients leave first (the newest first), then those with a request in flight.
                busy = set(self._in_flight.values())
                order = sorted(self._members, key=lambda c: (c in busy, -c))
                for client in order[: len(self._members) - target]:
                    self._members.discard(client)
        self._applied_until = max(self._applied_until, end)
