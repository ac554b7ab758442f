"""RoCE configuration drift: ECN (DCQCN) off on the RoCE priority, congestion notifications that
arrive and are ignored (`rp_cnp_ignored`: the reaction point is not enabled), a trust mode other
than the fabric's, and PFC pause storms (field-2026.md §5.4). A firmware update or a reboot
without the tuning script is how a port drifts; each finding names the file or counter."""

from __future__ import annotations

from exporter.health import alerts
from exporter.health.finding import NETWORK, Finding
from exporter.health.record import FindingKind, register
from exporter.health.view import NodeView
from exporter.settings import HealthSettings

#: the window counter-based drift is judged over
WINDOW = 300.0
_POINTS = {"np": "notification point: no CNPs are sent for marked packets",
           "rp": "reaction point: CNPs that arrive are ignored"}  # fmt: skip


def ecn_disabled(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    priority = str(s.roce_priority)
    for key in sorted(view.ports):
        port = view.ports[key]
        off = [point for point in ("np", "rp") if port.ecn.get((point, priority)) is False]
        if not off:
            continue
        what = "; ".join(f"roce_{point} ({_POINTS[point]})" for point in off)
        text = f"ECN off on the RoCE priority {priority} of {port.netdev}: {what}"
        source = f"/sys/class/net/{port.netdev}/ecn/roce_{off[0]}/enable/{priority}"
        found.append(Finding("ecn_disabled", NETWORK, port.name, text, source, 0.0))
    return found


def cnp_ignored(view: NodeView, s: HealthSettings) -> list[Finding]:
    found = []
    for _, labels in view.counter_keys.get("llm_rdma_port_errors_total", []):
        if labels.get("kind") != "cnp_ignored":
            continue
        ignored = view.increase("llm_rdma_port_errors_total", labels, WINDOW) or 0.0
        if ignored > 0:
            name = f"{labels.get('device', '?')}/{labels.get('port', '?')}"
            text = f"{ignored:.0f} congestion notifications arrived and were ignored in {WINDOW / 60:.0f} minutes"
            found.append(Finding("cnp_ignored", NETWORK, name, text, "hw_counters/rp_cnp_ignored", ignored))
    return found


def trust_mismatch(view: NodeView, s: HealthSettings) -> list[Finding]:
    if s.expected_trust is None:
        return []
    found = []
    for key in sorted(view.ports):
        port = view.ports[key]
        if port.trust and port.trust != s.expected_trust:
            text = f"QoS trust {port.trust} on {port.netdev}, the fabric expects {s.expected_trust}"
            source = f"/sys/class/net/{port.netdev}/qos/trust"
            found.append(Finding("trust_mismatch", NETWORK, port.name, text, source, 0.0))
    return found


def pause_storm(view: NodeView, s: HealthSettings) -> list[Finding]:
    found: dict[str, Finding] = {}
    for _, labels in view.counter_keys.get("llm_rdma_port_pause_storm_events_total", []):
        events = view.increase("llm_rdma_port_pause_storm_events_total", labels, WINDOW) or 0.0
        if events > 0:
            name = f"{labels.get('device', '?')}/{labels.get('port', '?')}"
            text = f"{events:.0f} pause-storm {labels.get('level', '')} event(s) in {WINDOW / 60:.0f} minutes"
            found[name] = Finding("pfc_pause_storm", NETWORK, name, text, "ethtool tx_pause_storm_*_events", 1.0)
    for _, labels in view.counter_keys.get("llm_rdma_port_pause_seconds_total", []):
        paused = view.increase("llm_rdma_port_pause_seconds_total", labels, WINDOW) or 0.0
        span = view.span("llm_rdma_port_pause_seconds_total", labels, WINDOW)
        share = paused / span if span > 0 else 0.0
        name = f"{labels.get('device', '?')}/{labels.get('port', '?')}"
        if share > s.pause_time_ratio and name not in found:
            direction, priority = labels.get("direction", ""), labels.get("priority", "")
            text = f"priority {priority} paused {share:.0%} of the time ({direction}; line {s.pause_time_ratio:.0%})"
            source = f"ethtool {direction}_prio{priority}_pause_duration"
            found[name] = Finding("pfc_pause_storm", NETWORK, name, text, source, share)
    return list(found.values())


for _id, _title, _check, _alert, _line, _reads in (
    ("ecn_disabled", "ECN off on the RoCE priority", ecn_disabled, alerts.ROCE_DRIFT,
     "ecn/roce_np or roce_rp/enable/<roce_priority> is 0 (`roce_priority`, 3)", ()),
    ("cnp_ignored", "CNPs ignored", cnp_ignored, alerts.ROCE_DRIFT,
     "rp_cnp_ignored rose in the last 5 minutes: CNPs arrive while the reaction point is off",
     (("llm_rdma_port_errors_total", WINDOW),)),
    ("trust_mismatch", "QoS trust mode", trust_mismatch, alerts.ROCE_DRIFT,
     "qos/trust differs from `expected_trust` (not judged unless set)", ()),
    ("pfc_pause_storm", "PFC pause storm", pause_storm, alerts.PAUSE_STORM,
     "a pause-storm event in 5 minutes, or a priority paused more than `pause_time_ratio` (0.1) of the time",
     (("llm_rdma_port_pause_storm_events_total", WINDOW), ("llm_rdma_port_pause_seconds_total", WINDOW))),
):  # fmt: skip
    register(FindingKind(_id, NETWORK, _title, _check, _alert, _line, _reads))
