"""The plain-HTTP path of `open_body` (exporter.sources.plain_http): one kept-alive connection per
origin, and the same guarantees as the requests path where it differs in transport.

The server here is a raw socket loop, so a test can count connections and send exactly the bytes
a misbehaving target sends (a short body, a stale kept-alive connection).
"""

from __future__ import annotations

import gzip
import http.client
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.settings import ScrapeAuth
from exporter.sources import plain_http
from exporter.sources.base import SourceError
from exporter.sources.http_fetch import (
    ACCEPT_TEXT,
    NoRedirectSession,
    PlainBody,
    ResponseBody,
    SameOriginSession,
    open_body,
)
from exporter.sources.scrape_auth import ScrapeAuthorizer
from tests.raw_server import RawServer, ok


@pytest.fixture
def session() -> Iterator[SameOriginSession]:
    """A scraping session, closed (with its kept-alive connections) after the test."""
    opened = SameOriginSession()
    yield opened
    opened.close()


def fetch(session: SameOriginSession | NoRedirectSession, url: str, cap: int = 1 << 20) -> bytes:
    with open_body(session, url, 5.0, cap) as body:
        assert isinstance(body, PlainBody)
        return bytes(body.read())


def test_consecutive_scrapes_share_one_kept_alive_connection(
    served: list[RawServer], session: SameOriginSession
) -> None:
    server = RawServer(lambda n: ok(b"up 1\n"))
    served.append(server)
    for _ in range(5):
        assert fetch(session, server.url()) == b"up 1\n"
    assert (server.connections, server.requests) == (1, 5)


def test_a_connection_the_target_closed_meanwhile_is_replaced_not_an_error(
    served: list[RawServer], session: SameOriginSession
) -> None:
    # A target's keep-alive timeout (uvicorn's is 5 s) is shorter than a 15 s scrape interval.
    server = RawServer(lambda n: ok(b"up 1\n"), close_after=lambda n: True)
    served.append(server)
    assert fetch(session, server.url()) == b"up 1\n"
    assert fetch(session, server.url()) == b"up 1\n"
    assert (server.connections, server.requests) == (2, 2)


def test_a_body_shorter_than_its_content_length_is_a_connection_error(
    served: list[RawServer], session: SameOriginSession
) -> None:
    server = RawServer(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nup 1\n", close_after=lambda n: True)
    served.append(server)
    with pytest.raises(SourceError) as caught:
        fetch(session, server.url())
    assert caught.value.reason == "connection"


def test_gzip_is_inflated_and_counted_against_the_cap_after_inflating(
    served: list[RawServer], session: SameOriginSession
) -> None:
    text = b"up 1\n" * 10_000  # 50 KB that compresses to a few hundred bytes
    packed = gzip.compress(text)
    server = RawServer(lambda n: ok(packed, b"Content-Encoding: gzip\r\n"))
    served.append(server)
    assert fetch(session, server.url()) == text
    with pytest.raises(SourceError) as caught:
        fetch(session, server.url(), cap=len(text) - 1)
    assert caught.value.reason == "too_large"
    assert len(packed) < len(text) - 1  # what came over the wire was under the cap


def test_chunked_bodies_are_read_to_their_end_and_the_connection_kept(
    served: list[RawServer], session: SameOriginSession
) -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nup 1\n\r\n5\r\nup 2\n\r\n0\r\n\r\n"
    server = RawServer(lambda n: chunked)
    served.append(server)
    assert fetch(session, server.url()) == b"up 1\nup 2\n"
    assert fetch(session, server.url()) == b"up 1\nup 2\n"
    assert server.connections == 1


def test_a_same_origin_redirect_is_followed_and_one_elsewhere_refused(served: list[RawServer]) -> None:
    other = RawServer(lambda n: ok(b"elsewhere 1\n"))
    served.append(other)

    def reply(n: int) -> bytes:
        if n == 0:
            return b"HTTP/1.1 302 Found\r\nLocation: /real\r\nContent-Length: 0\r\n\r\n"
        if n == 1:
            return ok(b"up 1\n")
        return b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % other.url().encode()

    server = RawServer(reply)
    served.append(server)
    following, refusing = SameOriginSession(), NoRedirectSession()
    try:
        assert fetch(following, server.url()) == b"up 1\n"
        with pytest.raises(SourceError, match="not followed") as elsewhere:
            fetch(following, server.url())
        with pytest.raises(SourceError, match="not followed"):
            fetch(refusing, server.url())
    finally:
        following.close()
        refusing.close()
    assert elsewhere.value.reason == "http_status"
    assert other.requests == 0


def test_a_proxy_in_the_environment_sends_the_scrape_through_requests(
    served: list[RawServer], monkeypatch: pytest.MonkeyPatch, session: SameOriginSession
) -> None:
    # The proxy is the served port itself, answering as a forward proxy would: requests sends it
    # the absolute URL, which only the requests path does.
    server = RawServer(lambda n: ok(b"up 1\n"))
    served.append(server)
    monkeypatch.setenv("HTTP_PROXY", server.url(""))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with open_body(session, "http://engine.invalid:8000/metrics", 5.0, 1024) as body:
        assert isinstance(body, ResponseBody)
        assert bytes(body.read()) == b"up 1\n"


def test_each_request_is_what_http_client_would_send_and_follows_the_sessions_headers(
    served: list[RawServer], session: SameOriginSession, tmp_path: Path
) -> None:
    server = RawServer(lambda n: ok(b"up 1\n"))
    served.append(server)
    for _ in range(2):
        fetch(session, server.url())
    assert server.heads[0] == server.heads[1]  # written once, sent again
    reference = RawServer(lambda n: ok(b"up 1\n"))
    served.append(reference)
    by_http_client = http.client.HTTPConnection("127.0.0.1", reference.port)
    headers = session.plain_headers(server.url(), {"Accept": ACCEPT_TEXT, "Accept-Encoding": "gzip"})
    by_http_client.request("GET", "/metrics", headers=headers)
    by_http_client.getresponse().read()
    by_http_client.close()
    assert server.heads[0] == reference.heads[0].replace(b":%d" % reference.port, b":%d" % server.port)
    # a session header changed, an auth whose token file is rotated: every request says so
    session.headers["X-Scraper"] = "one"
    fetch(session, server.url())
    session.headers["X-Scraper"] = "two"
    fetch(session, server.url())
    token = tmp_path / "token"
    session.auth = ScrapeAuthorizer(ScrapeAuth(bearer_token_file=str(token)))
    for value in ("first", "second-and-longer"):
        token.write_text(value)
        fetch(session, server.url())
    assert [b"X-Scraper: one" in head for head in server.heads[2:]] == [True, False, False, False]
    assert b"X-Scraper: two" in server.heads[3]
    assert b"Authorization: Bearer first\r\n" in server.heads[4]
    assert b"Authorization: Bearer second-and-longer\r\n" in server.heads[5]


def test_a_body_left_unread_closes_its_connection(served: list[RawServer], session: SameOriginSession) -> None:
    server = RawServer(lambda n: ok(b"up 1\n" * 200_000))  # 1 MB: more than one read
    served.append(server)
    with open_body(session, server.url(), 5.0, 1 << 22) as body:
        next(body.chunks())  # the parser had enough
    assert server.closed_by_client.wait(5)  # closed, not left open to the garbage collector
    assert fetch(session, server.url()).startswith(b"up 1\n")
    assert server.connections == 2


# --- header blocks read without the email package where they are plain ----------------------

_HEADER_CHARS = st.sampled_from(list("Ab-: \t\r\x7f\xe9=;,/0") + ["\r\n", "\n"])
_HEADER_LINE = st.one_of(
    st.sampled_from(
        [
            b"Content-Type: text/plain; version=0.0.4\r\n",
            b"Content-Length: 52658\r\n",
            b"Transfer-Encoding: chunked\r\n",
            b"Set-Cookie: a=1\r\n",
            b"Set-Cookie: b=2; Path=/\r\n",
            b"X-Empty:\r\n",
            b"X-Blanks: \t  padded \t \r\n",
            b"X-Bare-LF: yes\n",
            b" folded continuation\r\n",
            b"\tfolded with a tab\r\n",
            b"No-Colon-Here\r\n",
            b"Spaced Name: x\r\n",
            b": no name\r\n",
            b"From someone\r\n",
            b"X-Latin: caf\xe9\r\n",
        ]
    ),
    st.lists(_HEADER_CHARS, max_size=12).map(lambda chars: "".join(chars).encode("iso-8859-1") + b"\r\n"),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_HEADER_LINE, max_size=8), st.sampled_from([b"\r\n", b"\n", b""]))
def test_header_blocks_read_exactly_as_http_client_reads_them(lines: list[bytes], end: bytes) -> None:
    block = b"".join(lines) + end + b"body that is not a header\r\n"
    expected = http.client.parse_headers(io.BytesIO(block))
    got = plain_http.read_headers(io.BytesIO(block))
    assert type(got) is type(expected)
    assert got.items() == expected.items()
    for name in ("content-length", "Set-Cookie", "X-Blanks", "x-missing"):
        assert got.get(name) == expected.get(name)
        assert got.get_all(name) == expected.get_all(name)


def test_header_lines_are_bounded_as_http_client_bounds_them() -> None:
    with pytest.raises(http.client.LineTooLong):
        plain_http.read_headers(io.BytesIO(b"X-Long: " + b"v" * 70000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        plain_http.read_headers(io.BytesIO(b"X-Many: 1\r\n" * 101 + b"\r\n"))
