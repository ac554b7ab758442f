"""The stages before the engine: ingress and client_network, from normalized gateway, probe and
engine families fed round after round into the Diagnoser (as the exporter does)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from exporter.diagnosis import Diagnoser
from exporter.model import Metric, QuantileSummary, Sample
from exporter.settings import GatewayTarget, ProbeTarget

GW = {"gateway": "gw", "gateway_type": "haproxy"}
ENGINE = {"engine": "e", "engine_type": "vllm", "model": "m"}
NAN3 = ((0.5, float("nan")), (0.95, float("nan")), (0.99, float("nan")))


@dataclass
class Path:
    """Cumulative counters of a gateway, a probe and an engine, advanced one round at a time."""

    engine_up: float = 1.0
    ok: float = 0.0
    errors_503: float = 0.0
    aborted_499: float = 0.0
    gateway_sum: float = 0.0
    gateway_count: float = 0.0
    engine_sum: float = 0.0
    engine_count: float = 0.0
    probe: dict[str, list[float]] = field(default_factory=lambda: {"gateway": [0.0, 0.0], "direct": [0.0, 0.0]})

    def step(self, *, requests: int = 10, errors: int = 0, engine_s: float = 0.2, gateway_s: float = 0.21,
             probe_gateway_s: float = 0.1, probe_direct_s: float = 0.09, aborts: int = 0) -> list[Metric]:  # fmt: skip
        self.ok += requests - errors - aborts
        self.errors_503 += errors
        self.aborted_499 += aborts
        self.gateway_sum += gateway_s * requests
        self.gateway_count += requests
        if self.engine_up:
            self.engine_sum += engine_s * (requests - errors)
            self.engine_count += requests - errors
        for path, seconds in (("gateway", probe_gateway_s), ("direct", probe_direct_s)):
            self.probe[path][0] += seconds
            self.probe[path][1] += 1
        out: list[Metric] = [
            Sample("llm_gateway_up", GW, 1.0),
            Sample("llm_gateway_requests_total", {**GW, "code_class": "2xx", "code": ""}, self.ok),
            Sample("llm_gateway_requests_total", {**GW, "code_class": "5xx", "code": "503"}, self.errors_503),
            Sample("llm_gateway_requests_total", {**GW, "code_class": "4xx", "code": "499"}, self.aborted_499),
            QuantileSummary("llm_gateway_request_duration_seconds", GW, NAN3, self.gateway_count, self.gateway_sum),
            Sample("llm_engine_up", ENGINE, self.engine_up),
        ]
        if self.engine_up:
            out.append(
                QuantileSummary(
                    "llm_engine_e2e_request_latency_seconds", ENGINE, NAN3, self.engine_count, self.engine_sum
                )
            )
        for path, (total, count) in self.probe.items():
            out.append(
                QuantileSummary("llm_probe_e2e_latency_seconds", {"probe": "p", "path": path}, NAN3, count, total)
            )
        return out


def diagnoser() -> Diagnoser:
    d = Diagnoser()
    d.path.configure(
        [GatewayTarget(url="http://127.0.0.1:1/metrics", name="gw", engines=("e",))],
        [
            ProbeTarget(
                name="p", url="http://127.0.0.1:2/v1", model="m", direct_url="http://127.0.0.1:3/v1", gateway="gw"
            )
        ],
    )
    return d


def run(d: Diagnoser, path: Path, rounds: int, **step: float) -> dict:
    for i in range(rounds):
        d.update(path.step(**step), float(i * 5))  # type: ignore[arg-type]
    return d.report()["gateways"][0]


def test_a_healthy_path_names_no_stage() -> None:
    verdict = run(diagnoser(), Path(), 8)
    assert verdict["primary"] == "none"
    assert verdict["scores"]["ingress"] < 0.4 and verdict["scores"]["client_network"] < 0.4


def test_a_slow_client_network_is_client_network() -> None:
    d, path = diagnoser(), Path()
    run(d, path, 4)
    verdict = run(d, path, 12, probe_gateway_s=0.9)
    assert verdict["primary"] == "client_network"
    assert verdict["latency_components_seconds"]["client_to_gateway"] > 0.5
    assert any("before the gateway" in line for line in verdict["evidence"])
    engine = d.report()["engines"][0]
    assert engine["primary"] == "none"  # the engine's own stages are untouched
    assert engine["scores"]["client_network"] == verdict["scores"]["client_network"]
    assert engine["gateway"] == "gw"


def test_gateway_503s_with_a_healthy_engine_are_ingress() -> None:
    d, path = diagnoser(), Path()
    run(d, path, 4)
    verdict = run(d, path, 12, errors=4)
    assert verdict["primary"] == "ingress"
    assert any("503: " in line for line in verdict["evidence"])


def test_client_aborts_are_named_in_the_ingress_evidence() -> None:
    # The framework's sign of an ingress limit: "connection timeouts or large numbers of 499/502".
    d, path = diagnoser(), Path()
    run(d, path, 4)
    verdict = run(d, path, 12, aborts=3)
    lines = [line for line in verdict["evidence"] if "499" in line]
    assert len(lines) == 1 and lines[0].startswith("ingress: client aborts and timeouts: 499: ")
    aborted, answered = (float(n) for n in re.findall(r"(\d+) of (\d+) responses", lines[0])[0])
    assert aborted > 0 and lines[0].endswith(f"({aborted / answered:.1%})")


def test_gateway_time_far_above_the_engines_is_ingress() -> None:
    verdict = run(diagnoser(), Path(), 12, gateway_s=1.5, probe_gateway_s=1.5, probe_direct_s=0.09)
    assert verdict["primary"] == "ingress"
    assert verdict["latency_components_seconds"]["gateway"] > 1.0


def test_503s_from_a_dead_engine_are_the_engines_not_the_ingress() -> None:
    d, path = diagnoser(), Path()
    run(d, path, 4)
    path.engine_up = 0.0
    verdict = run(d, path, 12, errors=10)
    assert verdict["primary"] == "none"
    assert verdict["engines_down"] == ["e"]
    assert any("engine e behind the gateway is down" in line for line in verdict["evidence"])


def test_the_path_gauges_are_exported() -> None:
    d, path = diagnoser(), Path()
    gauges = []
    for i in range(6):
        gauges = d.update(path.step(probe_gateway_s=0.9), float(i * 5))  # type: ignore[arg-type]
    names = {m.name for m in gauges}
    assert {
        "llm_gateway_bottleneck_score",
        "llm_gateway_bottleneck_primary",
        "llm_gateway_latency_component_seconds",
    } <= names
    primary = [m for m in gauges if m.name == "llm_gateway_bottleneck_primary" and isinstance(m, Sample) and m.value]
    assert [m.labels["stage"] for m in primary] == ["client_network"]
