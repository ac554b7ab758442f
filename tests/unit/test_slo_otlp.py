"""The OTLP receiver: vLLM request spans in, joint attainment, goodput and the request mix out."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from exporter.config import ConfigError, build
from exporter.model import QuantileSummary, Sample
from exporter.settings import OtlpSettings, SloTarget
from exporter.slo.monitor import SloMonitor
from exporter.slo.otlp import OtlpReceiver

CLOCK = [100.0]


def attribute(key: str, value: float | int | str) -> KeyValue:
    item = KeyValue(key=key)
    if isinstance(value, str):
        item.value.string_value = value
    elif isinstance(value, int):
        item.value.int_value = value
    else:
        item.value.double_value = value
    return item


def export(*requests_: tuple[float, float, int], model: str = "tiny", extra_span: bool = False) -> bytes:
    """An export as vLLM's OTLPSpanExporter sends it: one `llm_request` span per request with
    (ttft, e2e, completion tokens), attribute names as vllm/tracing/utils.py spells them."""
    payload = ExportTraceServiceRequest()
    resource = payload.resource_spans.add()
    resource.resource.attributes.append(attribute("service.name", "vllm"))
    scope = resource.scope_spans.add()
    for ttft, e2e, tokens in requests_:
        span = scope.spans.add(name="llm_request")
        span.attributes.extend(
            [
                attribute("gen_ai.response.model", model),
                attribute("gen_ai.latency.time_to_first_token", ttft),
                attribute("gen_ai.latency.e2e", e2e),
                attribute("gen_ai.latency.time_in_queue", 0.01),
                attribute("gen_ai.usage.prompt_tokens", 100),
                attribute("gen_ai.usage.completion_tokens", tokens),
            ]
        )
    if extra_span:
        scope.spans.add(name="http.request")
    return payload.SerializeToString()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    settings = OtlpSettings(listen="127.0.0.1:0", max_body_bytes=64 * 1024, max_spans_per_second=1000)
    started = OtlpReceiver(settings, clock=lambda: CLOCK[0]).start()
    yield started
    started.close()


def post(receiver: OtlpReceiver, body: bytes, **headers: str) -> requests.Response:
    return requests.post(
        f"http://127.0.0.1:{receiver.port}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf", **headers},
        timeout=10,
    )


def samples(receiver: OtlpReceiver, slo: SloTarget) -> dict[str, float]:
    monitor = SloMonitor([slo], 60.0, receiver.store)
    engine_up = Sample("llm_engine_up", {"engine": "vllm-0", "engine_type": "vllm", "model": "tiny"}, 1.0)
    out = {}
    for metric in monitor.update([engine_up], CLOCK[0]):
        if isinstance(metric, Sample) and metric.name.startswith(("llm_slo_joint", "llm_otlp")):
            assert metric.name.startswith("llm_otlp") or metric.labels["engine"] == "vllm-0"
            out[f"{metric.name}{metric.labels.get('result', '')}"] = metric.value
        elif isinstance(metric, QuantileSummary) and metric.name == "llm_request_generation_tokens":
            out["output_tokens_p50"] = dict(metric.quantiles)[0.5]
    return out


def test_joint_attainment_counts_a_request_good_only_when_every_threshold_holds(receiver: OtlpReceiver) -> None:
    # TTFT ≤ 0.5 s and TPOT ≤ 0.05 s: the first meets both; the second misses TPOT ((3.0-0.2)/10 =
    # 0.28 s) though its TTFT is fine; the third misses TTFT; the fourth has one token (TPOT 0).
    body = export((0.2, 0.7, 11), (0.2, 3.0, 11), (0.9, 1.2, 11), (0.3, 0.3, 1), extra_span=True)
    response = post(receiver, body)
    assert response.status_code == 200
    ExportTraceServiceResponse().ParseFromString(response.content)
    values = samples(receiver, SloTarget("chat", 0.9, ttft_seconds=0.5, itl_seconds=0.05))
    assert values["llm_slo_joint_attainment_ratio"] == pytest.approx(0.5)
    assert values["llm_slo_joint_goodput_requests_per_second"] == pytest.approx(2 / 60)
    assert values["output_tokens_p50"] == 11
    assert values["llm_otlp_spans_totalrecorded"] == 4 and values["llm_otlp_spans_totalignored"] == 1


def test_gzip_bodies_are_read_and_requests_leave_the_window(receiver: OtlpReceiver) -> None:
    assert post(receiver, gzip.compress(export((0.1, 0.2, 2))), **{"Content-Encoding": "gzip"}).status_code == 200
    slo = SloTarget("ttft", 0.9, ttft_seconds=0.5)
    assert samples(receiver, slo)["llm_slo_joint_attainment_ratio"] == 1.0
    CLOCK[0] += 120  # past the 60 s window
    assert "llm_slo_joint_attainment_ratio" not in samples(receiver, slo)


def test_a_body_over_the_cap_is_refused_before_it_is_read(receiver: OtlpReceiver) -> None:
    response = post(receiver, b"\0" * (64 * 1024 + 1))
    assert response.status_code == 413
    bomb = gzip.compress(b"\0" * (10 * 1024 * 1024))  # 10 KiB on the wire, 10 MiB inflated
    assert post(receiver, bomb, **{"Content-Encoding": "gzip"}).status_code == 413
    assert post(receiver, b"\xff\xff\xff garbage").status_code == 400
    counts = receiver.store.counts
    assert counts["payload_too_large"] == 2 and counts["payload_bad_request"] == 1


def test_spans_past_the_per_second_budget_are_dropped_and_counted() -> None:
    settings = OtlpSettings(listen="127.0.0.1:0", max_spans_per_second=10)
    receiver = OtlpReceiver(settings).start()
    try:
        response = post(receiver, export(*[(0.1, 0.2, 2)] * 50))
        answer = ExportTraceServiceResponse()
        answer.ParseFromString(response.content)
        assert response.status_code == 200 and answer.partial_success.rejected_spans >= 39
        assert receiver.store.counts["span_rate_limited"] == answer.partial_success.rejected_spans
    finally:
        receiver.close()


def test_otlp_settings_are_validated() -> None:
    assert build({}).otlp.listen is None
    assert build({"otlp": {"listen": "127.0.0.1:4318"}}).otlp.listen == "127.0.0.1:4318"
    with pytest.raises(ConfigError, match="otlp.max_body_bytes"):
        build({"otlp": {"listen": "127.0.0.1:4318", "max_body_bytes": 0}})
    with pytest.raises(ConfigError, match="otlp.listen"):
        build({"otlp": {"listen": "nowhere"}})
