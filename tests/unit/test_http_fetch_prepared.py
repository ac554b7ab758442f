"""Sessions remember a prepared GET per URL; what must change per request still does."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from pathlib import Path

from exporter.settings import ScrapeAuth
from exporter.sources.http_fetch import NoRedirectSession, open_body
from exporter.sources.scrape_auth import authorizer
from tests.support import RouteServer


def recording_server(seen: list[dict[str, str]], set_cookie: str | None = None) -> RouteServer:
    server = RouteServer()

    def respond(handler: BaseHTTPRequestHandler) -> None:
        seen.append(dict(handler.headers))
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        if set_cookie:
            handler.send_header("Set-Cookie", set_cookie)
        handler.send_header("Content-Length", "2")
        handler.end_headers()
        handler.wfile.write(b"x\n")

    server.routes["/metrics"] = respond
    return server


def fetch(session: NoRedirectSession, url: str) -> bytes:
    with open_body(session, url, 5.0, 1024) as body:
        return bytes(body.read())


def test_a_rotated_token_goes_out_on_the_next_request(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []
    server = recording_server(seen)
    token = tmp_path / "token"
    token.write_text("first\n")
    session = NoRedirectSession()
    session.auth = authorizer(ScrapeAuth(bearer_token_file=str(token)))
    try:
        assert fetch(session, server.url("/metrics")) == b"x\n"
        token.write_text("second-token\n")
        assert fetch(session, server.url("/metrics")) == b"x\n"
        assert fetch(session, server.url("/metrics?page=2")) == b"x\n"
    finally:
        session.close()
        server.close()
    assert [h.get("Authorization") for h in seen] == ["Bearer first", "Bearer second-token", "Bearer second-token"]
    assert all(h.get("Accept-Encoding") == "gzip" for h in seen)


def test_cookies_a_target_sets_are_sent_back() -> None:
    seen: list[dict[str, str]] = []
    server = recording_server(seen, set_cookie="session=abc")
    session = NoRedirectSession()
    try:
        fetch(session, server.url("/metrics"))
        fetch(session, server.url("/metrics"))
    finally:
        session.close()
        server.close()
    assert "Cookie" not in seen[0] and seen[1].get("Cookie") == "session=abc"
