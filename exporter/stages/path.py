"""What the stages before the engine read: one gateway's window means (`PathReading`).

Latency is split by means over one window (rate of the sum over rate of the count), never by
subtracting quantiles, which do not add up:

- engine            = the engines' mean e2e latency (their own clock, from arrival in the API server)
- gateway_to_engine = the gateway's mean upstream time − engine (the hop, where it is measured)
- gateway           = the gateway's mean request time − max(upstream, engine): its own handling,
                      queue and routing
- client_to_gateway = the probe's mean through the gateway − its mean direct to the engine − the
                      gateway's own time (like for like: the same tiny request both ways); without
                      a direct path, the probe's mean − the gateway's mean request time

Populations differ between the gateway (all requests) and the probe (its own tiny ones); the
components are clamped at 0 and the evidence names the means they came from. The diagnosis
(exporter/diagnosis/path.py) keeps the windows and builds one reading per gateway per round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.stages.record import Scope
from exporter.stages.scoring import ramp

COMPONENTS = ("client_to_gateway", "gateway", "gateway_to_engine", "engine")


@dataclass(frozen=True)
class PathReading:
    """One gateway over the window: its means, the probes through it, its responses and limits."""

    #: the gateway's own metrics could be read (llm_gateway_up)
    up: bool
    #: engines behind the gateway that are down (llm_engine_up 0)
    engines_down: tuple[str, ...] = ()
    backends_down: float = 0.0
    #: a probe goes through this gateway (probes:)
    probed: bool = False
    #: responses in the window, by status class and by single code ("5xx", "503")
    counts: Mapping[str, float] = field(default_factory=dict)
    answered: float = 0.0
    #: the 5xx share of the responses, None below the responses where a share means something
    error_share: float | None = None
    #: mean seconds per request: the gateway's whole request, its upstream wait, the engines' e2e
    total: float | None = None
    upstream: float | None = None
    engine: float | None = None
    #: the probe's mean through the gateway and direct to the engine
    probe_gateway: float | None = None
    probe_direct: float | None = None
    queued: float | None = None
    connections: float | None = None
    connections_limit: float | None = None

    @property
    def engines_healthy(self) -> bool:
        """The gateway is readable and no engine behind it is down: a down engine's 502/503 are
        its own failure, so neither stage before the engine scores then."""
        return self.up and not self.engines_down

    @property
    def own(self) -> float | None:
        """The gateway's own time: its mean request time beyond the time spent behind it."""
        if self.total is None:
            return None
        inner = max(v for v in (self.upstream, self.engine, 0.0) if v is not None)
        return max(0.0, self.total - inner)

    @property
    def client_to_gateway(self) -> float | None:
        if self.probe_gateway is None:
            return None
        if self.probe_direct is not None:
            return max(0.0, self.probe_gateway - self.probe_direct - (self.own or 0.0))
        if self.total is not None:
            return max(0.0, self.probe_gateway - self.total)
        return None

    @property
    def components(self) -> dict[str, float]:
        """Mean seconds per request in each part of the path, where measured."""
        found: dict[str, float] = {}
        if self.engine is not None:
            found["engine"] = self.engine
            if self.upstream is not None:
                found["gateway_to_engine"] = max(0.0, self.upstream - self.engine)
        own = self.own
        if own is not None:
            found["gateway"] = own
        client = self.client_to_gateway
        if client is not None:
            found["client_to_gateway"] = client
        return found

    @property
    def error_level(self) -> float:
        """0-1: server errors at the gateway (a backend down while the engines are up counts half)."""
        level = ramp(self.error_share, 0.01, 0.1)
        if self.backends_down and not self.engines_down:
            level = max(level, 0.5)
        return level

    @property
    def slow_gateway(self) -> float:
        """0-1: the gateway's own time against the engines' (ramp 0.5x-2x, at least 50 ms)."""
        own = self.own
        reference = max(self.engine or 0.0, 0.05)
        return ramp(own / reference if own is not None else None, 0.5, 2.0)


#: The stages before the engine, scored per gateway; their alerts form the rule group named here.
PATH: Scope[PathReading] = Scope("path", alert_group="ingress", stage_label=False)
