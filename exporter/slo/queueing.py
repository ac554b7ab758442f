"""The queue in front of an engine's batch, as an M/M/c queue: how close to the rate that fills its
slots a latency threshold lets the load go (exporter/slo/headroom.py, the admission piece)."""

from __future__ import annotations

import math


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (Erlang C), by the stable Erlang B
    recursion; `offered` = λ / (per-server rate), in erlangs."""
    if offered >= servers:
        return 1.0
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    rho = offered / servers
    return blocking / (1.0 - rho * (1.0 - blocking))


def queueing_utilization(threshold: float, observed: float, objective: float, slots: float, rate: float) -> float:
    """How close to the admission rate μ the latency threshold lets the load go.

    The engine admits up to `slots` requests at once, each holding its slot for S = slots / μ: an
    M/M/c queue with c = slots. A request waits with probability C (Erlang C) and then for an
    exponential time of rate (μ - λ); the objective holds while P(wait > slack) = C·e^{-(μ-λ)·slack}
    ≤ 1 - objective, with slack the threshold minus today's latency. Solved for ρ = λ/μ by
    bisection (C rises with ρ, e^{…} too).
    """
    slack = threshold - observed
    if slack <= 0 or not rate > 0 or slots < 1:
        return 0.0
    servers = int(min(slots, 100_000))
    low, high = 0.0, 1.0
    for _ in range(40):
        rho = (low + high) / 2
        tail = erlang_c(servers, rho * servers) * math.exp(-(rate - rho * rate) * slack)
        low, high = (rho, high) if tail <= 1.0 - objective else (low, rho)
    return low
