"""SLOs against a real vLLM on CPU: the exporter's attainment vs the client's, its headroom from
light load vs a concurrency sweep's actual break, and vLLM's own request spans over OTLP/HTTP
into the real `serve`.

One engine for the module, started with `--otlp-traces-endpoint` pointing at the exporter's OTLP
receiver (its OpenTelemetry packages provisioned by vllm_otel.py). TTFT and e2e SLOs on vLLM's
bucket edges are configured at once, so whatever this machine's latencies are, some of them are
neither always met nor never. Figures are printed (pytest -s) and checked:
- per-dimension attainment from the exporter equal to the engine's own buckets over the same
  load, and never below the fraction of client requests within the threshold by more than 2
  points. Only that bound holds against the client: vLLM times a request from its arrival in the
  engine, and on two cores shared by the API server, the engine core and its spinning worker, a
  request waits before that in the starved server (tens of milliseconds with short answers,
  hundreds with answers of up to 384 tokens streaming beside it), a wait no metric of vLLM's
  records (its `http_request_duration_seconds` is its e2e plus 2-3 ms). The client therefore sees
  fewer requests within a threshold, never more; the gap is printed;
- vLLM's own request spans reach `serve` over OTLP/HTTP: every request recorded, the joint
  attainment and the request mix exported (the span figures cover the last window; printed);
- headroom estimated at light load beside the rate where a concurrency sweep at the same request
  mix (20 s a step) breaks each SLO, judged by the engine's own histograms (the SLO's definition)
  and by the client (printed with the errors; the issue's budget is ±30 %, not asserted on a
  two-core machine shared with other tests).
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pytest
import yaml

from tests.integration.loadgen import LoadResult, LoadSpec, run_load
from tests.integration.vllm_otel import ensure_vllm_otel
from tests.integration.vllm_server import VllmServer
from tests.support import CONDITION_BOUND_SECONDS, ExporterProcess, free_port

# Engine start-up alone can take minutes on a loaded two-core machine.
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

# vLLM's TTFT bucket edges (vllm/v1/metrics/buckets.py) in the range a tiny CPU model spans: from
# 5 ms, since the engine's own TTFT of these short prompts is mostly under 20 ms (96.5 % of 1,181
# requests once, with two CPU-bound processes beside it), to 1 s, where a starved machine's tail is.
# vLLM's own TTFT bucket edges: a threshold on an edge is exact. From 1 ms: a quiet run of this
# engine once had 97 % of its TTFTs within 5 ms, and no threshold inside the distribution.
EDGES = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0)
# vLLM's e2e request-latency edges (vllm/v1/metrics/loggers.py, request_latency_buckets) that
# answers of up to 384 tokens reach on a quiet or a loaded machine; 0.3 s is vLLM's lowest.
E2E_EDGES = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0)
OBJECTIVE = 0.9
# Answers spread from 2 to 192 tokens, so e2e spreads too; at 20 s, a few hundred requests on a
# quiet machine, and never fewer than the 50 that make one request 2 points.
LIGHT = LoadSpec(concurrency=3, prompt_tokens=(16, 48), output_tokens=(2, 192), duration_s=20.0, seed=21)
# The attainment check's load: answers of up to 384 tokens, so e2e crosses vLLM's lowest edges (0.3
# and 0.5 s) on a faster machine too. With LIGHT's 192, a quiet run on a faster two-core machine
# finished 96.8 % of its requests within 0.3 s in the engine and all within 0.5 s: no e2e
# threshold fell inside the distribution. Three of the longest (432 tokens with the prompt) still
# fit the 1,536-token KV pool. The headroom comparison keeps LIGHT, the mix docs/slo.md measured.
ATTAINMENT = replace(LIGHT, output_tokens=(2, 384))
# A threshold with this many requests of the load on each side, where a count that put requests in
# the wrong bucket would show; a fast machine ends all but a few answers within vLLM's lowest e2e edge (0.3 s).
INSIDE_REQUESTS = 3
SWEEP = (2, 4, 8, 16)
SWEEP_SECONDS = 20.0  # 10 s steps once gave 3.1 req/s at concurrency 8 and 3.9 at 4: noise


@dataclass(frozen=True)
class Slo:
    """One configured SLO: a single threshold on vLLM's own histogram of its dimension."""

    dimension: str  # "ttft" or "e2e"
    edge: float

    @property
    def name(self) -> str:
        return f"{self.dimension}-{int(self.edge * 1000)}ms"

    @property
    def engine_family(self) -> str:
        return FAMILIES[self.dimension]

    def client_within(self, result: LoadResult) -> float:
        """The fraction of the client's requests within the threshold, timed by the client."""
        times = [r.ttft_s if self.dimension == "ttft" else r.e2e_s for r in result.ok_records]
        kept = [t for t in times if t is not None]
        return sum(1 for t in kept if t <= self.edge) / len(kept)


FAMILIES = {"ttft": "vllm:time_to_first_token_seconds", "e2e": "vllm:e2e_request_latency_seconds"}
SLOS = (*(Slo("ttft", e) for e in EDGES), *(Slo("e2e", e) for e in E2E_EDGES))


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[ExporterProcess, VllmServer]]:
    ensure_vllm_otel()
    engine_port, otlp_port = free_port(), free_port()
    config = {
        "window_seconds": 20,
        "engines": [{"name": "vllm-0", "type": "vllm", "url": f"http://127.0.0.1:{engine_port}/metrics"}],
        "slos": [{"name": s.name, f"{s.dimension}_seconds": s.edge, "objective": OBJECTIVE} for s in SLOS],
        "otlp": {"listen": f"127.0.0.1:{otlp_port}"},
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        yaml.safe_dump(config, handle)
    exporter = ExporterProcess("--config", handle.name, interval=1.0)
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "500"}
    server = VllmServer(
        port=engine_port,
        env=env,
        extra_args=["--otlp-traces-endpoint", f"http://127.0.0.1:{otlp_port}/v1/traces"],
        startup_timeout_s=600,
    )
    try:
        server.start()
        yield exporter, server
    finally:
        server.stop()
        exporter.close()


def values(text: str, family: str) -> dict[str, float]:
    """slo label -> value of one family (summed over the other labels)."""
    out: dict[str, float] = {}
    for match in re.finditer(rf"^{family}\{{([^}}]*)\}} (\S+)$", text, re.MULTILINE):
        slo = re.search(r'slo="([^"]+)"', match.group(1))
        if slo:
            out[slo.group(1)] = out.get(slo.group(1), 0.0) + float(match.group(2))
    return out


INF = float("inf")


def bucket(text: str, edge: float, family: str = FAMILIES["ttft"]) -> float:
    """vLLM's cumulative bucket of `family` at `edge` (le="+Inf" for INF)."""
    le = "+Inf" if edge == INF else f"{edge}"
    pattern = rf'^{re.escape(family)}_bucket\{{[^}}]*le="{re.escape(le)}"[^}}]*\}} (\S+)$'
    return sum(float(m.group(1)) for m in re.finditer(pattern, text, re.MULTILINE))


def settled(exporter: ExporterProcess, server: VllmServer, quiet_s: float = 2.5) -> tuple[str, str]:
    """The exporter's and the engine's texts once neither count moves: no load is running, so the
    engine's TTFT count stops when its last request finishes, and the exporter's once it has
    collected that (interval 1 s). Reading both only then is what makes their deltas comparable:
    a snapshot taken while the exporter was a collection behind the engine counted a few
    requests on one side only."""
    deadline = time.monotonic() + CONDITION_BOUND_SECONDS
    last: tuple[float, float] | None = None
    since = time.monotonic()
    while True:
        engine_text, exporter_text = server.metrics_text(), exporter.metrics()
        counts = (bucket(engine_text, INF), values(exporter_text, "llm_slo_events_total").get(SLOS[0].name, 0.0))
        if counts != last:
            last, since = counts, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return exporter_text, engine_text
        assert time.monotonic() < deadline, f"counts never settled: engine, exporter = {counts}"
        time.sleep(0.5)


def test_exporter_attainment_and_span_joint_attainment_agree_with_the_client(stack) -> None:
    exporter, server = stack
    run_load(server.base_url, LoadSpec(concurrency=1, duration_s=3.0, seed=20))  # warm the engine
    exporter.wait_for(lambda t: "llm_slo_events_total" in t)
    before, engine_before = settled(exporter, server)
    events0, good0 = values(before, "llm_slo_events_total"), values(before, "llm_slo_good_events_total")
    result = run_load(server.base_url, ATTAINMENT)
    assert result.error_count == 0 and len(result.ok_records) >= 20
    total = len(result.ok_records)
    # 2 points, as the issue asks; with fewer than 50 requests one request is more than that.
    tolerance = max(0.02, 1.0 / total)
    first = SLOS[0].name
    exporter.wait_for(lambda t: values(t, "llm_slo_events_total").get(first, 0) - events0.get(first, 0) >= total)
    # The exporter's counts are the engine's own: its buckets over the same load.
    after, engine_after = settled(exporter, server)
    events, good = values(after, "llm_slo_events_total"), values(after, "llm_slo_good_events_total")
    # The engine times a request from its arrival in vLLM; the client adds its wait in the API
    # server before that and its HTTP path (module docstring). The client can never see more
    # requests within a threshold than the engine does: bounded one way, the gap printed.
    print(f"\n{total} requests; {'SLO':12} {'client':>8} {'exporter':>9} {'engine':>8}")
    inside = {"ttft": 0, "e2e": 0}
    for slo in SLOS:
        name = slo.name
        exported = (good[name] - good0.get(name, 0)) / (events[name] - events0.get(name, 0))
        family = slo.engine_family
        engine = (bucket(engine_after, slo.edge, family) - bucket(engine_before, slo.edge, family)) / (
            bucket(engine_after, INF, family) - bucket(engine_before, INF, family)
        )
        client = slo.client_within(result)
        print(f"{'':14}{name:12} {client:8.1%} {exported:9.1%} {engine:8.1%}")
        assert abs(exported - engine) <= 1.0 / total, (name, exported, engine)
        assert client <= exported + tolerance, (name, client, exported, total)
        # Inside the distribution: at least INSIDE_REQUESTS of the load on either side of the threshold.
        inside[slo.dimension] += min(exported, 1.0 - exported) * total >= INSIDE_REQUESTS
    # The spans: every request arrived; joint attainment and the request mix are exported.
    text = exporter.wait_for(lambda t: "llm_slo_joint_attainment_ratio" in t)
    spans = values(text, "llm_slo_joint_attainment_ratio")
    recorded = re.search(r'^llm_otlp_spans_total\{result="recorded"\} (\S+)$', text, re.MULTILINE)
    assert recorded and float(recorded.group(1)) >= total
    assert re.search(r"^llm_request_generation_tokens_count\{", text, re.MULTILINE)
    for slo in SLOS:
        print(f"{slo.name:12} spans (last 20 s window) {spans.get(slo.name, float('nan')):7.1%}")
    # Thresholds inside each distribution, where a wrong count would show.
    assert all(inside.values()), f"no threshold fell inside a latency distribution: {inside}"


def engine_within(slo: Slo, before: str, after: str) -> float:
    """The fraction of the engine's requests between two of its texts within the threshold."""
    family = slo.engine_family
    count = bucket(after, INF, family) - bucket(before, INF, family)
    return (bucket(after, slo.edge, family) - bucket(before, slo.edge, family)) / count if count else math.nan


def test_headroom_at_light_load_beside_the_concurrency_sweeps_break(stack) -> None:
    exporter, server = stack
    light = run_load(server.base_url, LIGHT)
    text = exporter.wait_for(lambda t: "llm_capacity_max_concurrency" in t)
    estimate_concurrency = values(text, "llm_capacity_max_concurrency")
    estimate_rate = values(text, "llm_capacity_max_request_rate")
    confidence = values(text, "llm_capacity_estimate_confidence_ratio")
    light_rate = len(light.ok_records) / LIGHT.duration_s
    # The truth: the highest rate a sweep at the light load's request mix reached while still
    # meeting each SLO's objective, judged by the engine's own histograms over each step (what the
    # SLO is defined on) and by the client's timings.
    engine_breaks: dict[str, float] = {}
    client_breaks: dict[str, float] = {}
    met_at_last: set[tuple[int, str]] = set()  # (id of the breaks, SLO) met at the sweep's last step
    print(f"\nlight load: {light_rate:.2f} req/s at concurrency {LIGHT.concurrency}; attainment engine / client")
    print(f"{'concurrency':>11} {'req/s':>7} " + " ".join(f"{s.name:>13}" for s in SLOS))
    for concurrency in SWEEP:
        engine_before = server.metrics_text()
        started = time.monotonic()
        spec = replace(LIGHT, concurrency=concurrency, duration_s=SWEEP_SECONDS, seed=30 + concurrency)
        result = run_load(server.base_url, spec)
        rate = len(result.ok_records) / (time.monotonic() - started)
        engine_after = server.metrics_text()  # a closed loop: every request of the step has finished
        cells = []
        for slo in SLOS:
            by_engine, by_client = engine_within(slo, engine_before, engine_after), slo.client_within(result)
            cells.append(f"{by_engine:6.1%}/{by_client:6.1%}")
            for breaks, attained in ((engine_breaks, by_engine), (client_breaks, by_client)):
                if attained >= OBJECTIVE:
                    breaks[slo.name] = max(rate, breaks.get(slo.name, 0.0))
                    if concurrency == SWEEP[-1]:
                        met_at_last.add((id(breaks), slo.name))
        print(f"{concurrency:11d} {rate:7.2f} " + " ".join(f"{c:>13}" for c in cells))

    def truth(breaks: dict[str, float], name: str) -> str:
        rate = breaks.get(name, 0.0)
        # Met at the sweep's last step: the break lies past it (+), the error is a bound.
        past = "+" if (id(breaks), name) in met_at_last else " "
        error = f"{estimate_rate.get(name, math.nan) / rate - 1:+6.0%}" if rate > 0 else f"{'–':>6}"
        return f"{rate:7.2f}{past} {error}"

    columns = ("engine-judged truth, error", "client-judged truth, error")
    print(f"{'SLO':12} {columns[0]:>26} {columns[1]:>26} {'estimate c':>10} {'req/s':>7} {'conf':>5}")
    for slo in SLOS:
        print(
            f"{slo.name:12} {truth(engine_breaks, slo.name):>26} {truth(client_breaks, slo.name):>26} "
            f"{estimate_concurrency.get(slo.name, math.nan):10.1f} {estimate_rate.get(slo.name, math.nan):7.2f} "
            f"{confidence.get(slo.name, math.nan):5.2f}"
        )
    # An SLO the light load already misses has no capacity left (0); one it meets has some.
    met = [s.name for s in SLOS if s.client_within(light) >= OBJECTIVE + 0.05]
    assert met and all(estimate_rate.get(name, 0) > 0 for name in met), (met, estimate_rate)
