"""The RDMA source: InfiniBand / RoCE port readings as `llm_rdma_port_*` samples.

Reading sysfs is `exporter.sysfs.infiniband`'s job; this module decides what the numbers mean and
keeps them honest (shared/research/rdma-counters.md has the sources for each rule):

- Data counters are 4-octet words: the reader already returns bytes. `counters/` is preferred to
  the legacy 64-bit `counters_ext/` (that is what node_exporter exports, so the two agree), except
  when the `counters/` value sits at 2^32-1 — a saturated 32-bit legacy PMA counter — and
  `counters_ext/` has the same quantity. Ports without PMA (rxe) take packets from hw_counters.
- PMA counters clamp at their maximum (2^width - 1) instead of wrapping. A clamped counter still
  exports its value (it is what the kernel says, and node_exporter exports it too) but it is
  flagged by `llm_rdma_port_counter_saturated{counter}` and never turned into a rate.
- mlx5 Q counters in hw_counters are 32-bit firmware counters that wrap. They only reach the
  exposition through the sums below, which add wrap-aware increments, so a wrap is not a reset
  and the sums never go down while the exporter runs (a component that is unreadable for a while
  adds its whole increment when it comes back).
- Utilization is the byte increase over the window (`RateWindow`, fed with already-monotonic
  values) divided by elapsed time and by the link rate, only for ACTIVE ports.
- Not every file is read every collection (issue #23: at most node_exporter's cost on the same
  tree). Every `full_read_every`-th collection reads every file the mapping uses and lists the
  devices; the ones between read, for the ports then found, only the port state and the counters
  that move from second to second and feed the diagnosis' rates (`FAST_FILES`), and only those the
  port has. Error counters, the link rate, layer and netdev come from the last full read, so an
  error shows up within `full_read_every` collections, and a new port at the next full read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.model import Metric, Sample
from exporter.sources.base import Source, SourceError
from exporter.sources.rdma_counters import (
    CONGESTION,
    ERROR_KINDS,
    FAST_FILES,
    MLX5_WRAPPING_HW_COUNTERS,
    PMA_COUNTER_WIDTHS,
    RETRANSMISSION_COUNTERS,
    TRAFFIC,
    UTILIZATION,
    WANTED_FILES,
)
from exporter.sysfs.infiniband import (
    DATA_WORD_COUNTERS,
    DATA_WORD_OCTETS,
    InfiniBandPort,
    Wanted,
    class_path,
    read_infiniband_class,
    read_port,
)
from exporter.window import RateWindow

log = logging.getLogger(__name__)

_ACTIVE = 4  # IB_PORT_ACTIVE
_U32 = 1 << 32
#: collections per full read (at the default 5 s interval: errors and link attributes every 30 s)
FULL_READ_EVERY = 6
#: the port files a full read takes: phys_state is not mapped
_FULL_ATTRIBUTES = frozenset({"state", "rate", "link_layer", "netdev"})
_FAST_ATTRIBUTES = frozenset({"state"})
#: the traffic families with a window: those utilization is made of
_RATED = frozenset(traffic for _, traffic in UTILIZATION)


def counter_increment(previous: int, current: int, wraps_at_32_bits: bool) -> int:
    """How much a counter advanced between two readings.

    A 32-bit counter that was in its upper half and is now in its lower half wrapped (it would
    need more than 2^31 events between two collections to fake that). Any other decrease is a
    reset — the device was re-created or its counters cleared — and the new value is the increase,
    as Prometheus' `increase()` counts it.
    """
    if current >= previous:
        return current - previous
    if wraps_at_32_bits and previous < _U32 and previous >= _U32 // 2 and current < _U32 // 2:
        return current + _U32 - previous
    return current


def saturated_counters(port: InfiniBandPort) -> list[str]:
    """PMA counters of the port whose value is their maximum, i.e. clamped."""
    result = []
    for name, value in port.counters.items():
        width = PMA_COUNTER_WIDTHS.get(name)
        raw = value // DATA_WORD_OCTETS if name in DATA_WORD_COUNTERS else value
        if width is not None and raw == (1 << width) - 1:
            result.append(name)
    return result


@dataclass(frozen=True, slots=True)
class _StaticPart:
    """A port's samples and facts made of a full read's files that fast reads do not open."""

    labels: dict[str, str]
    info: Sample
    link_rate: float | None
    #: saturated PMA counters among those only a full read opens
    saturated: frozenset[str]
    errors: list[Sample]


@dataclass
class _PortState:
    """What one port remembers between collections: last raw values and monotonic sums."""

    last: dict[tuple[str, str], int] = field(default_factory=dict)
    wide: set[tuple[str, str]] = field(default_factory=set)  # seen above 2^32-1: not a 32-bit counter
    sums: dict[str, float] = field(default_factory=dict)
    windows: dict[str, RateWindow] = field(default_factory=dict)
    cumulative: dict[str, float] = field(default_factory=dict)
    #: what the last full read made of the files a fast read does not open
    static: _StaticPart | None = None

    def advance(self, key: tuple[str, str], value: int) -> int | None:
        """Increment since the last reading of this counter; None on first sight."""
        if value >= _U32:
            self.wide.add(key)
        previous = self.last.get(key)
        self.last[key] = value
        if previous is None:
            return None
        wraps = key[0] == "hw_counters" and key[1] in MLX5_WRAPPING_HW_COUNTERS and key not in self.wide
        return counter_increment(previous, value, wraps)

    def monotonic_sum(self, family: str, components: list[tuple[tuple[str, str], int]]) -> float:
        """Starts at the components' values, then grows by their wrap-aware increments only."""
        first = family not in self.sums
        total = self.sums.get(family, 0.0)
        for key, value in components:
            increment = self.advance(key, value)
            if increment is not None:
                total += increment
            elif first:
                total += value
        self.sums[family] = total
        return total


@dataclass(frozen=True, slots=True)
class _FullRead:
    """A port the last full read found, and what the collections until the next one read of it."""

    device: str
    port: int
    path: str
    #: the `FAST_FILES` the port has (present or unreadable): the only files a fast read opens
    plan: Wanted


class RdmaSource(Source):
    name = "rdma"

    def __init__(self, sysfs: str, window_seconds: float, full_read_every: int = FULL_READ_EVERY) -> None:
        self.sysfs = sysfs
        self.window_seconds = window_seconds
        self.full_read_every = max(1, full_read_every)
        self._collections = 0
        self._full: dict[tuple[str, int], _FullRead] = {}
        self._ports: dict[tuple[str, int], _PortState] = {}
        self._reported_unreadable: set[tuple[str, int, str]] = set()

    def collect(self, now: float) -> list[Metric]:
        root = class_path(self.sysfs)
        if not os.path.isdir(root):
            raise SourceError("no_data", f"{root} is gone (RDMA driver unloaded?)")
        full = self._collections % self.full_read_every == 0
        self._collections += 1
        ports = self._read_full(root) if full else self._read_fast()
        metrics: list[Metric] = []
        seen = set()
        for port in ports:
            key = (port.device, port.port)
            seen.add(key)
            self._log_unreadable(port)
            state = self._ports.setdefault(key, _PortState())
            if full or state.static is None:
                state.static = _static_part(port, state)
            metrics.extend(self._port_metrics(now, port, state, state.static))
        for gone in self._ports.keys() - seen:
            log.info("rdma: port %s/%d is gone", *gone)
            del self._ports[gone]
            self._full.pop(gone, None)
        return metrics

    def _read_full(self, root: str) -> list[InfiniBandPort]:
        """Every device and port, every mapped file; remembered for the fast reads after it."""
        ports = [
            port
            for device in read_infiniband_class(self.sysfs, WANTED_FILES, _FULL_ATTRIBUTES, device_info=False)
            for port in device.ports
        ]
        self._full = {
            (port.device, port.port): _FullRead(
                port.device, port.port, os.path.join(root, port.device, "ports", str(port.port)), _fast_plan(port)
            )
            for port in ports
        }
        return ports

    def _read_fast(self) -> list[InfiniBandPort]:
        """The ports of the last full read, only their state and fast-moving counters read afresh
        (the rest of such a reading is empty); a port whose directory is gone is left out, and
        forgotten until a full read finds it again."""
        ports = []
        for known in self._full.values():
            fresh = read_port(known.path, known.device, known.port, known.plan, _FAST_ATTRIBUTES, listed=False)
            if fresh is not None:
                ports.append(fresh)
        return ports

    def _port_metrics(self, now: float, port: InfiniBandPort, state: _PortState, static: _StaticPart) -> list[Sample]:
        """The port's samples: `port` is this collection's reading, full or fast (the fast-moving
        families need nothing else), `static` what the last full read made of the rest."""
        labels = static.labels
        out = [static.info]
        if port.state is not None:
            out.append(Sample("llm_rdma_port_up", labels, 1.0 if port.state.id == _ACTIVE else 0.0))
        if static.link_rate is not None:
            out.append(Sample("llm_rdma_port_link_rate_bytes_per_second", labels, static.link_rate))
        saturated = static.saturated.union(saturated_counters(port))
        for counter in sorted(saturated):
            out.append(Sample("llm_rdma_port_counter_saturated", {**labels, "counter": counter}, 1.0))
        rates_usable: dict[str, float] = {}
        for family, sources in TRAFFIC.items():
            picked = _pick(port, sources, saturated)
            if picked is None:
                continue
            value, clamped = picked
            out.append(Sample(family, labels, float(value)))
            if family not in _RATED:
                continue
            increment = state.advance(("traffic", family), value)
            if not clamped:
                rate = self._window_rate(state, family, now, increment)
                if rate is not None:
                    rates_usable[family] = rate
        active = port.state is not None and port.state.id == _ACTIVE
        if active and static.link_rate:
            out.extend(_utilization(labels, rates_usable, static.link_rate))
        wait = port.counters.get("port_xmit_wait")
        if wait is not None:
            out.append(Sample("llm_rdma_port_transmit_wait_total", labels, float(wait)))
        for family, name in CONGESTION:
            count = port.hw_counters.get(name)
            if count is not None:
                out.append(Sample(family, labels, float(count)))
        present = [(("hw_counters", n), port.hw_counters[n]) for n in RETRANSMISSION_COUNTERS if n in port.hw_counters]
        if present:
            out.append(
                Sample("llm_rdma_port_retransmissions_total", labels, state.monotonic_sum("retransmissions", present))
            )
        out.extend(static.errors)
        return out

    def _window_rate(self, state: _PortState, family: str, now: float, increment: int | None) -> float | None:
        """Per-second increase over the window, from increments already freed of wraps and resets."""
        window = state.windows.get(family)
        if window is None:
            window = state.windows[family] = RateWindow(self.window_seconds)
        cumulative = state.cumulative.get(family, 0.0) + (increment or 0)
        state.cumulative[family] = cumulative
        return window.observe(now, cumulative)

    def _log_unreadable(self, port: InfiniBandPort) -> None:
        """One line per port naming the files newly found unreadable (not one per file: a
        PMA-less driver fails every counters/ file)."""
        new = [p for p in port.unreadable if (port.device, port.port, p) not in self._reported_unreadable]
        if new:
            self._reported_unreadable.update((port.device, port.port, p) for p in new)
            log.info(
                "rdma: %s/%d: %d file(s) cannot be read or parsed, left out: %s",
                port.device,
                port.port,
                len(new),
                ", ".join(new),
            )


def _static_part(port: InfiniBandPort, state: _PortState) -> _StaticPart:
    """What a full read gives the fast reads after it: the port's info, link rate, error sums and
    the saturation of the counters they do not read."""
    labels = {"device": port.device, "port": str(port.port)}
    info = {**labels, "link_layer": port.link_layer or "", "netdev": port.netdev or ""}
    errors = []
    for kind, components in ERROR_KINDS.items():
        values = [(c, v) for c in components if (v := _value(port, c)) is not None]
        if values:
            total = state.monotonic_sum(f"errors:{kind}", values)
            errors.append(Sample("llm_rdma_port_errors_total", {**labels, "kind": kind}, total))
    slow_saturated = frozenset(c for c in saturated_counters(port) if c not in FAST_FILES["counters"])
    return _StaticPart(
        labels, Sample("llm_rdma_port_info", info, 1.0), port.rate_bytes_per_second, slow_saturated, errors
    )


def _utilization(labels: dict[str, str], rates: dict[str, float], link_rate: float) -> list[Sample]:
    out = []
    for family, traffic in UTILIZATION:
        rate = rates.get(traffic)
        if rate is not None:
            # Counter reads lag `now` by up to a few ms, so full line rate can compute as a
            # hair above 1: the ratio is bounded to its documented 0-1.
            out.append(Sample(family, labels, min(1.0, max(0.0, rate / link_rate))))
    return out


def _fast_plan(port: InfiniBandPort) -> Wanted:
    """The `FAST_FILES` this port has: read, or there but unreadable (so that it can recover)."""
    unreadable = set(port.unreadable)
    return {
        directory: frozenset(n for n in names if n in _in(port, directory) or f"{directory}/{n}" in unreadable)
        for directory, names in FAST_FILES.items()
    }


def _in(port: InfiniBandPort, directory: str) -> Mapping[str, int]:
    """The port's values from one counter directory ("counters", "counters_ext", "hw_counters")."""
    if directory == "counters":
        return port.counters
    if directory == "hw_counters":
        return port.hw_counters
    if directory == "counters_ext":
        return port.counters_ext
    raise KeyError(directory)


def _value(port: InfiniBandPort, component: tuple[str, str]) -> int | None:
    directory, name = component
    return _in(port, directory).get(name)


def _pick(
    port: InfiniBandPort, sources: tuple[tuple[str, str], ...], saturated: frozenset[str]
) -> tuple[int, bool] | None:
    """(value, clamped) from the first source that has one; a clamped counters/ value gives way
    to a later source that has the same quantity unclamped."""
    found = [(c, v) for c in sources if (v := _value(port, c)) is not None]
    if not found:
        return None
    (where, value), *others = found
    clamped = where[0] == "counters" and where[1] in saturated
    if clamped and others:
        return others[0][1], False
    return value, clamped
