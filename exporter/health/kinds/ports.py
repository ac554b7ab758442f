"""InfiniBand and RoCE ports below their capability: a rate under the expected one (configured,
else the node's most common rate: sysfs shows only the active rate, so degradation is found against
an expectation, as GPUd's `atLeastRate` does), a physical state that is not LinkUp, and a link that
flaps or counts symbol errors past NVSentinel's NIC-monitor lines."""

from __future__ import annotations

from collections import Counter

from exporter.health import alerts
from exporter.health.finding import NETWORK, Finding
from exporter.health.record import FindingKind, register
from exporter.health.view import NodeView, PortFacts
from exporter.settings import HealthSettings

_GBIT = 125_000_000  # bytes/s per Gb/s
LINK_UP = 5  # phys_state "5: LinkUp"
LINK_ERROR_RECOVERY = 6
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 6: "LinkErrorRecovery"}
#: GPUd keeps a port that went down flagged for ten minutes (sticky window), NVSentinel pages on any
LINK_DOWNED_WINDOW = 600.0
MINUTE, HOUR = 60.0, 3600.0
#: NVSentinel's non-fatal symbol-error line, per second over a minute
SYMBOL_ERRORS_PER_SECOND = 10.0


def expected_rates(view: NodeView, s: HealthSettings) -> dict[str, tuple[float, str]]:
    """Per link layer, the rate every port should run at (bytes/s) and where that comes from."""
    if s.expected_port_rate_gbps is not None:
        configured = (s.expected_port_rate_gbps * _GBIT, "configured")
        return {layer: configured for layer in {p.link_layer for p in view.ports.values()}}
    rates: dict[str, Counter[float]] = {}
    for port in view.ports.values():
        if port.up and port.rate_bytes_per_second:
            rates.setdefault(port.link_layer, Counter())[port.rate_bytes_per_second] += 1
    expected = {}
    for layer, counts in rates.items():
        top = max(counts.values())
        expected[layer] = (max(rate for rate, n in counts.items() if n == top), "the node's most common rate")
    return expected


def rate_below(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    expected = expected_rates(view, s)
    for port in _ports(view):
        want = expected.get(port.link_layer)
        if not port.up or port.rate_bytes_per_second is None or want is None or port.rate_bytes_per_second >= want[0]:
            continue
        rate, line = port.rate_bytes_per_second / _GBIT, want[0] / _GBIT
        text = f"{rate:g} Gb/s, {port.rate_bytes_per_second / want[0]:.0%} of the {line:g} Gb/s expected ({want[1]})"
        found.append(Finding("port_rate_low", NETWORK, port.name, text, "sysfs ports/<p>/rate", rate / line))
    return found


def not_link_up(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for port in _ports(view):
        state = port.physical_state
        if state is None or state == LINK_UP or not (port.up or state == LINK_ERROR_RECOVERY):
            continue
        name = PHYS_STATES.get(int(state), str(int(state)))
        text = f"physical state {int(state)}: {name}, not LinkUp" + (" (retraining)" if state == 6 else "")
        found.append(Finding("port_not_linkup", NETWORK, port.name, text, "sysfs ports/<p>/phys_state", state))
    return found


def flapping(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for port in _ports(view):
        downed = _increase(view, port, "link_downed", LINK_DOWNED_WINDOW)
        recoveries = _increase(view, port, "link_error_recovery", MINUTE)
        if downed > 0:
            text = f"link went down {downed:.0f} time(s) in the last {LINK_DOWNED_WINDOW / 60:.0f} minutes"
            found.append(Finding("link_flapping", NETWORK, port.name, text, "counters/link_downed", downed))
        elif recoveries > s.link_error_recovery_per_minute:
            text = f"{recoveries:.0f} link error recoveries in a minute (line {s.link_error_recovery_per_minute:g})"
            source = "counters/link_error_recovery"
            found.append(Finding("link_flapping", NETWORK, port.name, text, source, recoveries))
    return found


def _increase(view: NodeView, port: PortFacts, counter: str, seconds: float) -> float:
    labels = {"device": port.device, "port": port.port, "counter": counter}
    return view.increase("llm_rdma_port_link_errors_total", labels, seconds) or 0.0


def symbol_errors(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for port in _ports(view):
        labels = {"device": port.device, "port": port.port, "counter": "symbol_error"}
        hourly = view.increase("llm_rdma_port_link_errors_total", labels, HOUR) or 0.0
        minute = view.increase("llm_rdma_port_link_errors_total", labels, MINUTE) or 0.0
        span = view.span("llm_rdma_port_link_errors_total", labels, MINUTE)
        per_second = minute / span if span > 0 else 0.0
        if hourly > s.symbol_errors_per_hour or per_second > SYMBOL_ERRORS_PER_SECOND:
            text = (
                f"{hourly:.0f} symbol errors in the last hour (line {s.symbol_errors_per_hour:g}, a bit error rate "
                f"near 1e-12), {per_second:.1f}/s lately (line {SYMBOL_ERRORS_PER_SECOND:g}/s)"
            )
            found.append(Finding("symbol_errors", NETWORK, port.name, text, "counters/symbol_error", hourly))
    return found


def _ports(view: NodeView) -> list[PortFacts]:
    return [view.ports[key] for key in sorted(view.ports)]


_LINK_ERRORS = "llm_rdma_port_link_errors_total"
for _id, _title, _check, _alert, _line, _reads in (
    ("port_rate_low", "port below its expected rate", rate_below, alerts.PORT_DEGRADED,
     "rate below `expected_port_rate_gbps`, else below the node's most common rate per link layer (GPUd atLeastRate)",
     ()),
    ("port_not_linkup", "port not LinkUp", not_link_up, alerts.PORT_DEGRADED,
     "phys_state other than 5: LinkUp on an ACTIVE port, or 6: LinkErrorRecovery", ()),
    ("link_flapping", "link flapping", flapping, alerts.LINK_FLAPPING,
     "link_downed rose in the last 10 minutes (NVSentinel: any; GPUd: sticky 10 minutes), or link_error_recovery "
     "above `link_error_recovery_per_minute` (NVSentinel: 5/min)", ((_LINK_ERRORS, LINK_DOWNED_WINDOW),)),
    ("symbol_errors", "symbol errors", symbol_errors, alerts.LINK_FLAPPING,
     "symbol_error above `symbol_errors_per_hour` (NVSentinel: 120/h, BER about 1e-12) or 10/s over a minute",
     ((_LINK_ERRORS, HOUR),)),
):  # fmt: skip
    register(FindingKind(_id, NETWORK, _title, _check, _alert, _line, _reads))
