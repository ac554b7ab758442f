"""The OTLP receiver: vLLM request spans in, joint attainment, goodput and the request mix out, and
only for engines and models the exporter can vouch for."""

from __future__ import annotations

import base64
import gzip
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import bcrypt
import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from exporter.budget import SeriesBudget
from exporter.config import ConfigError, build
from exporter.model import QuantileSummary, Sample
from exporter.otlp_listener import OtlpHTTPServer
from exporter.settings import EngineTarget, OtlpSettings, SloTarget
from exporter.slo.monitor import SloMonitor
from exporter.slo.otlp import SpanSink
from exporter.slo.requests import from_spans
from exporter.webguard import WebGuard
from tests.otlp_spans import export

CLOCK = [100.0]
ENGINE = EngineTarget(url="http://127.0.0.1:8000/metrics", name="vllm-0", type="vllm")
ENGINE_UP = Sample("llm_engine_up", {"engine": "vllm-0", "engine_type": "vllm", "model": "tiny"}, 1.0)


def make_sink(**settings: object) -> SpanSink:
    options = {"listen": "127.0.0.1:0", "max_body_bytes": 64 * 1024, "max_spans_per_second": 1000, **settings}
    sink = SpanSink(OtlpSettings(**options), max_label_value_length=1024, max_models=3, clock=lambda: CLOCK[0])  # type: ignore[arg-type]
    sink.observe([ENGINE_UP], [ENGINE], 60.0)
    return sink


@pytest.fixture
def receiver() -> Iterator[OtlpHTTPServer]:
    sink = make_sink()
    started = OtlpHTTPServer(sink.settings, sink).start()
    yield started
    started.close()


def post(receiver: OtlpHTTPServer, body: bytes, **headers: str) -> requests.Response:
    return requests.post(
        f"http://127.0.0.1:{receiver.port}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf", **headers},
        timeout=10,
    )


def samples(sink: SpanSink, slo: SloTarget) -> dict[str, float]:
    monitor = SloMonitor([slo], 60.0, sink.store)
    out = {}
    for metric in monitor.update([ENGINE_UP], CLOCK[0]):
        if isinstance(metric, Sample) and metric.name.startswith(("llm_slo_joint", "llm_otlp")):
            assert metric.name.startswith("llm_otlp") or metric.labels["engine"] == "vllm-0"
            out[f"{metric.name}{metric.labels.get('result', '')}"] = metric.value
        elif isinstance(metric, QuantileSummary) and metric.name == "llm_request_generation_tokens":
            out["output_tokens_p50"] = dict(metric.quantiles)[0.5]
    return out


def test_joint_attainment_counts_a_request_good_only_when_every_threshold_holds(receiver: OtlpHTTPServer) -> None:
    # TTFT ≤ 0.5 s and TPOT ≤ 0.05 s: the first meets both; the second misses TPOT ((3.0-0.2)/10 =
    # 0.28 s) though its TTFT is fine; the third misses TTFT; the fourth has one token (TPOT 0).
    body = export((0.2, 0.7, 11), (0.2, 3.0, 11), (0.9, 1.2, 11), (0.3, 0.3, 1), extra_span=True)
    response = post(receiver, body)
    assert response.status_code == 200
    ExportTraceServiceResponse().ParseFromString(response.content)
    values = samples(receiver.sink, SloTarget("chat", 0.9, ttft_seconds=0.5, itl_seconds=0.05))
    assert values["llm_slo_joint_attainment_ratio"] == pytest.approx(0.5)
    assert values["llm_slo_joint_goodput_requests_per_second"] == pytest.approx(2 / 60)
    assert values["output_tokens_p50"] == 11
    assert values["llm_otlp_spans_totalrecorded"] == 4 and values["llm_otlp_spans_totalignored"] == 1


def test_gzip_bodies_are_read_and_requests_leave_the_window(receiver: OtlpHTTPServer) -> None:
    assert post(receiver, gzip.compress(export((0.1, 0.2, 2))), **{"Content-Encoding": "gzip"}).status_code == 200
    slo = SloTarget("ttft", 0.9, ttft_seconds=0.5)
    assert samples(receiver.sink, slo)["llm_slo_joint_attainment_ratio"] == 1.0
    CLOCK[0] += 120  # past the 60 s window
    assert "llm_slo_joint_attainment_ratio" not in samples(receiver.sink, slo)


def test_a_body_over_the_cap_is_refused_before_it_is_read(receiver: OtlpHTTPServer) -> None:
    response = post(receiver, b"\0" * (64 * 1024 + 1))
    assert response.status_code == 413
    bomb = gzip.compress(b"\0" * (10 * 1024 * 1024))  # 10 KiB on the wire, 10 MiB inflated
    assert post(receiver, bomb, **{"Content-Encoding": "gzip"}).status_code == 413
    assert post(receiver, b"\xff\xff\xff garbage").status_code == 400
    counts = receiver.sink.store.counts
    assert counts["payload_too_large"] == 2 and counts["payload_bad_request"] == 1


def test_spans_past_the_per_second_budget_are_dropped_and_counted() -> None:
    sink = make_sink(max_spans_per_second=10)
    status, body = sink.accept(export(*[(0.1, 0.2, 2)] * 50), "127.0.0.1")
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(body)
    assert status == 200 and answer.partial_success.rejected_spans >= 39
    assert sink.store.counts["span_rate_limited"] == answer.partial_success.rejected_spans


# -- admission: only engines and models the exporter knows (#41: the receiver was an open door) --


def refused(sink: SpanSink, body: bytes, client: str = "127.0.0.1") -> dict[str, int]:
    sink.accept(body, client)
    return {key: value for key, value in sink.store.counts.items() if key.startswith("span_") and value}


def test_spans_for_a_model_no_engine_reports_are_dropped_and_counted() -> None:
    """Was: every new model name in a span became series (and state kept forever)."""
    sink = make_sink()
    assert refused(sink, export((0.1, 0.2, 2), model="made-up")) == {"span_unknown_model": 1}
    assert sink.store.totals == {}


def test_a_span_naming_no_model_is_its_engine_s_one_model() -> None:
    """vLLM's request spans carry no `gen_ai.response.model`: once every one was refused as
    an unknown model, and joint attainment never appeared for a real vLLM."""
    sink = make_sink()
    assert refused(sink, export((0.1, 0.2, 2), model=None)) == {"span_recorded": 1}
    assert {key[2] for key in sink.store.totals} == {"tiny"}
    two_models = make_sink()
    second = Sample("llm_engine_up", {**ENGINE_UP.labels, "model": "other"}, 1.0)
    two_models.observe([ENGINE_UP, second], [ENGINE], 60.0)
    assert refused(two_models, export((0.1, 0.2, 2), model=None)) == {"span_unknown_model": 1}


def test_spans_from_an_address_that_is_no_engine_are_dropped() -> None:
    """Was: anyone who could reach the port set the real model's attainment (forged spans)."""
    sink = make_sink()
    assert refused(sink, export((9.0, 9.5, 2)), client="127.0.0.2") == {"span_unknown_sender": 1}
    assert refused(sink, export((0.1, 0.2, 2)), client="::ffff:127.0.0.1")["span_recorded"] == 1  # dual-stack view
    any_sender = make_sink(senders="any")
    assert refused(any_sender, export((0.1, 0.2, 2)), client="10.9.9.9") == {"span_recorded": 1}


def test_a_label_longer_than_the_engines_bound_is_never_exported() -> None:
    """Was: a 1 MiB model name became a 1 MiB label (a 37.8 MB /metrics)."""
    sink = make_sink(models="any")
    assert refused(sink, export((0.1, 0.2, 2), model="m" * (1024 * 1024))) == {"span_label_too_long": 1}


def test_models_any_is_bounded_by_the_engines_max_models() -> None:
    sink = make_sink(models="any")
    for index in range(10):
        sink.accept(export((0.1, 0.2, 2), model=f"lora-{index}"), "127.0.0.1")
    models = {key[2] for key in sink.store.totals}
    assert len(models) == 2  # max_models 3, one of which the engine reports itself ("tiny")
    assert sink.store.counts["span_too_many_models"] == 8


def test_several_engines_at_one_address_are_told_apart_by_service_name() -> None:
    sink = make_sink()
    other = replace(ENGINE, url="http://127.0.0.1:8001/metrics", name="vllm-1")
    sink.observe(
        [ENGINE_UP, Sample("llm_engine_up", {**ENGINE_UP.labels, "engine": "vllm-1"}, 1.0)], [ENGINE, other], 60
    )
    assert refused(sink, export((0.1, 0.2, 2))) == {"span_ambiguous_engine": 1}
    sink.accept(export((0.1, 0.2, 2), service="vllm-1"), "127.0.0.1")
    assert list(sink.store.totals) == [("vllm-1", "vllm", "tiny")]


def test_per_model_state_is_pruned_once_the_model_is_gone_and_out_of_the_window() -> None:
    """Was: per-model totals were never pruned (RSS stayed up after the attack)."""
    sink = make_sink()
    sink.accept(export((0.1, 0.2, 2)), "127.0.0.1")
    assert ("vllm-0", "vllm", "tiny") in sink.store.totals
    renamed = Sample("llm_engine_up", {**ENGINE_UP.labels, "model": "tiny-v2"}, 1.0)
    sink.observe([renamed], [ENGINE], 60.0)  # gone from the engine's series, still in the window
    assert ("vllm-0", "vllm", "tiny") in sink.store.totals
    CLOCK[0] += 61
    sink.observe([renamed], [ENGINE], 60.0)
    assert sink.store.totals == {} and sink.store.since(0.0) == []


def test_span_series_never_push_an_engines_own_series_out_of_the_budget() -> None:
    """Was: span-made series were "node" series, kept before every engine's: spans with new model
    names filled the node cap and pushed llm_engine_up out of /metrics."""
    engine_series = [Sample("llm_engine_up", {**ENGINE_UP.labels, "model": f"m{i}"}, 1.0) for i in range(5)]
    span_series = [
        Sample("llm_slo_joint_attainment_ratio", {**ENGINE_UP.labels, "model": f"s{i}", "slo": "x"}, 0.0)
        for i in range(50)
    ]
    budget = SeriesBudget()
    kept, counts = budget.apply([*span_series, *engine_series], {}, 20, last=from_spans)
    assert all(m in kept for m in engine_series) and len(kept) == 20
    assert counts == {("otlp", "", "cardinality"): 1}


# -- the HTTP door: the web config's auth, per-client bytes ------------------------------------


def test_the_receiver_is_behind_the_web_configs_basic_auth(tmp_path: Path) -> None:
    """Was: no authentication at all; the web config covered /metrics only."""
    hashed = bcrypt.hashpw(b"secret", bcrypt.gensalt(rounds=4)).decode()
    config = tmp_path / "web.yml"
    config.write_text(f"basic_auth_users:\n  vllm: {hashed}\n")
    sink = make_sink()
    server = OtlpHTTPServer(sink.settings, sink, WebGuard(str(config))).start()
    try:
        assert post(server, export((0.1, 0.2, 2))).status_code == 401
        token = base64.b64encode(b"vllm:secret").decode()
        assert post(server, export((0.1, 0.2, 2)), Authorization=f"Basic {token}").status_code == 200
        assert sink.store.counts["span_recorded"] == 1  # the refused one was never decoded
    finally:
        server.close()


def test_one_client_past_its_bytes_per_second_is_refused_before_its_body_is_kept() -> None:
    """Was: one client's multi-MB payloads, back to back, took RSS from 60 to 218 MiB."""
    # A bucket of 256 KiB per client address, refilled at 1 KiB/s: a 200 KB body passes once, and
    # the next must wait minutes for its bytes.
    sink = make_sink(max_body_bytes=256 * 1024, max_client_bytes_per_second=1024)
    server = OtlpHTTPServer(sink.settings, sink).start()
    try:
        body = export(*[(0.1, 0.2, 2)] * 800)
        assert 150_000 < len(body) < 256 * 1024
        statuses = [post(server, body).status_code for _ in range(4)]
        assert statuses == [200, 429, 429, 429]
        assert sink.store.counts["payload_rate_limited"] == 3 and sink.store.counts["span_recorded"] == 800
    finally:
        server.close()


def test_otlp_settings_are_validated() -> None:
    assert build({}).otlp.listen is None
    otlp = build({"otlp": {"listen": "127.0.0.1:4318", "senders": "any", "web_config_file": "w.yml"}}).otlp
    assert otlp.listen == "127.0.0.1:4318" and otlp.senders == "any" and otlp.web_config_file == "w.yml"
    for bad, where in [
        ({"max_body_bytes": 0}, "otlp.max_body_bytes"),
        ({"listen": "nowhere"}, "otlp.listen"),
        ({"senders": "anyone"}, "otlp.senders"),
        ({"models": "all"}, "otlp.models"),
        ({"max_client_bytes_per_second": -1}, "otlp.max_client_bytes_per_second"),
    ]:
        with pytest.raises(ConfigError) as caught:
            build({"otlp": {"listen": "127.0.0.1:4318", **bad}})
        assert caught.value.where == where
