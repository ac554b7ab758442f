"""The one HTTP client (exporter.sources.http_fetch, aiohttp on the shared event loop): the promises
every outbound fetch keeps, pinned on loopback servers that send exactly what a misbehaving target
sends (tests/raw_server.py counts connections and keeps each request's head).

What was pinned before through the hand-written transports (plain_http, multiplex, the requests
path) is pinned here through the client that replaced them: kept-alive connections, one per
origin; a body shorter than its length is an error; the cap counts inflated bytes; redirects only
within the origin; credentials (a rotated token, netrc) and proxies (NO_PROXY ranges) as
documented; one deadline over headers and body; errors by reason, without secrets.
"""

from __future__ import annotations

import base64
import gzip
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.settings import ScrapeAuth
from exporter.sources import event_loop
from exporter.sources.base import SourceError
from exporter.sources.http_fetch import MAX_HEADER_BYTES, HttpClient, open_body, redact
from exporter.sources.scrape_auth import ScrapeAuthorizer
from tests.hostile import trickle
from tests.raw_server import RawServer, ok
from tests.support import RouteServer


@pytest.fixture
def client() -> Iterator[HttpClient]:
    opened = HttpClient()
    yield opened
    opened.close()


async def _read(client: HttpClient, url: str, timeout: float, cap: int, unread: bool) -> bytes:
    async with open_body(client, url, timeout, cap) as body:
        if unread:
            return await body.next_chunk()  # the parser had enough after one read
        return bytes(await body.read())


def fetch(client: HttpClient, url: str, cap: int = 1 << 22, timeout: float = 5.0, unread: bool = False) -> bytes:
    return event_loop.run(_read(client, url, timeout, cap, unread))


def refusal(client: HttpClient, url: str, cap: int = 1 << 22, timeout: float = 5.0) -> SourceError:
    with pytest.raises(SourceError) as caught:
        fetch(client, url, cap, timeout)
    return caught.value


def chunked(body: bytes, size: int = 1000) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    pieces = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" + pieces + b"0\r\n\r\n"


@pytest.mark.parametrize(
    ("target_closes", "connections"),
    # A target's keep-alive timeout (uvicorn's is 5 s) is shorter than a 15 s scrape interval: a
    # connection it closed meanwhile is replaced, not an error.
    [(False, 1), (True, 4)],
    ids=["kept-alive", "closed-by-the-target-meanwhile"],
)
def test_consecutive_fetches_share_one_connection_while_the_target_keeps_it(
    served: list[RawServer], client: HttpClient, target_closes: bool, connections: int
) -> None:
    server = RawServer(lambda n: ok(b"up 1\n"), close_after=lambda n: target_closes)
    served.append(server)
    for _ in range(4):
        assert fetch(client, server.url()) == b"up 1\n"
    assert (server.connections, server.requests) == (connections, 4)


def test_a_body_shorter_than_its_content_length_is_a_connection_error(
    served: list[RawServer], client: HttpClient
) -> None:
    server = RawServer(lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nup 1\n", close_after=lambda n: True)
    served.append(server)
    error = refusal(client, server.url())
    assert error.reason == "connection"
    assert str(error).endswith(": connection closed before the body was complete")


def test_chunked_gzip_and_deflate_bodies_read_as_the_plain_one(served: list[RawServer], client: HttpClient) -> None:
    text = b"# TYPE a gauge\n" + b"a 1\n" * 5000
    deflated = gzip.compress(text)[10:-8]  # raw deflate stream (no zlib header): deflate as servers send it
    replies = [ok(text), chunked(text), ok(gzip.compress(text), b"Content-Encoding: gzip\r\n")]
    replies.append(ok(deflated, b"Content-Encoding: deflate\r\n"))
    for reply in replies:
        served.append(RawServer(lambda n, reply=reply: reply))
    assert [fetch(client, server.url()) for server in served] == [text] * len(replies)
    assert [fetch(client, served[1].url()), served[1].connections] == [text, 1], "chunked: read to its end, kept"


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
def test_bodies_over_the_cap_are_too_large_the_cap_counting_inflated_bytes(
    served: list[RawServer], client: HttpClient, reply: bytes, message: str
) -> None:
    served.append(RawServer(lambda _: reply))
    error = refusal(client, served[0].url(), cap=1000)
    assert error.reason == "too_large"
    assert str(error).endswith(message)


@pytest.mark.parametrize(
    "extra",
    [b"Content-Encoding: gzip\r\n", b"Content-Encoding: br\r\n", b"Content-Encoding: compress\r\n"],
    ids=["not-gzip", "unasked-brotli", "unknown"],
)
def test_a_body_that_does_not_decode_is_a_parse_error(served: list[RawServer], client: HttpClient, extra) -> None:
    served.append(RawServer(lambda _: ok(b"not gzip at all\n", extra)))
    assert refusal(client, served[0].url()).reason == "parse"


def test_a_same_origin_redirect_is_followed_and_one_elsewhere_refused(served: list[RawServer]) -> None:
    other = RawServer(lambda n: ok(b"elsewhere 1\n"))
    served.append(other)

    def reply(n: int) -> bytes:
        if n in (0, 3):
            return b"HTTP/1.1 302 Found\r\nLocation: /real\r\nContent-Length: 0\r\n\r\n"
        if n == 1:
            return ok(b"up 1\n")
        return b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % other.url().encode()

    server = RawServer(reply)
    served.append(server)
    following, refusing = HttpClient(), HttpClient(follow_redirects=False)
    try:
        assert fetch(following, server.url()) == b"up 1\n"
        elsewhere = refusal(following, server.url())
        within = refusal(refusing, server.url())
    finally:
        following.close()
        refusing.close()
    assert elsewhere.reason == within.reason == "http_status"
    assert f"redirect to http://127.0.0.1:{other.port}/metrics not followed (another origin)" in str(elsewhere)
    assert "not followed (this target follows no redirect)" in str(within)
    assert other.requests == 0


def test_redirects_are_followed_three_times_at_most(served: list[RawServer], client: HttpClient) -> None:
    server = RawServer(lambda n: b"HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n")
    served.append(server)
    error = refusal(client, server.url())
    assert (error.reason, str(error).endswith("more than 3 redirects"), server.requests) == ("http_status", True, 4)


def test_each_request_asks_for_text_and_gzip_and_sends_a_rotated_token(served: list[RawServer], tmp_path: Path) -> None:
    server = RawServer(lambda n: ok(b"up 1\n"))
    served.append(server)
    token = tmp_path / "token"
    client = HttpClient(auth=ScrapeAuthorizer(ScrapeAuth(bearer_token_file=str(token))))
    try:
        for value in ("first", "second-and-longer"):
            token.write_text(value + "\n")
            fetch(client, server.url())
    finally:
        client.close()
    assert b"Accept: text/plain;version=0.0.4" in server.heads[0]
    assert b"Accept-Encoding: gzip\r\n" in server.heads[0]
    assert [b"Authorization: Bearer first\r\n" in server.heads[0], b"Bearer second-and-longer\r\n" in server.heads[1]]


def test_basic_auth_from_a_password_file_and_netrc_for_hosts_without_any(
    served: list[RawServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = RawServer(lambda n: ok(b"up 1\n"))
    served.append(server)
    password = tmp_path / "password"
    password.write_text("pw-one\n")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login netrc-user password netrc-pw\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    configured = HttpClient(auth=ScrapeAuthorizer(ScrapeAuth(username="scraper", password_file=str(password))))
    from_netrc, ignoring_env = HttpClient(), HttpClient(trust_env=False)
    try:
        for client in (configured, from_netrc, ignoring_env):
            fetch(client, server.url())
    finally:
        for client in (configured, from_netrc, ignoring_env):
            client.close()
    basic = [b"Authorization: Basic " + base64.b64encode(pair) for pair in (b"scraper:pw-one", b"netrc-user:netrc-pw")]
    assert basic[0] in server.heads[0] and basic[1] in server.heads[1]
    assert b"Authorization" not in server.heads[2]


def test_an_unreadable_credentials_file_is_a_connection_error_naming_it(
    served: list[RawServer], tmp_path: Path
) -> None:
    served.append(RawServer(lambda n: ok(b"up 1\n")))
    missing = tmp_path / "gone"
    client = HttpClient(auth=ScrapeAuthorizer(ScrapeAuth(bearer_token_file=str(missing))))
    try:
        error = refusal(client, served[0].url())
    finally:
        client.close()
    assert error.reason == "connection" and f"cannot read the credentials file {missing}" in str(error)
    assert served[0].requests == 0


def test_a_proxy_in_the_environment_carries_the_fetch_and_no_proxy_ranges_bypass_it(
    served: list[RawServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The proxy is a raw server answering as a forward proxy would: it is sent the absolute URL.
    proxy, direct = RawServer(lambda n: ok(b"via proxy 1\n")), RawServer(lambda n: ok(b"direct 1\n"))
    served += [proxy, direct]
    monkeypatch.setenv("HTTP_PROXY", proxy.url(""))
    monkeypatch.setenv("NO_PROXY", "10.0.0.0/8, .svc.cluster.local, 127.0.0.0/8")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    client = HttpClient()
    try:
        assert fetch(client, "http://engine.invalid:8000/metrics") == b"via proxy 1\n"
        assert fetch(client, direct.url()) == b"direct 1\n"  # 127.0.0.1 is in a NO_PROXY range
    finally:
        client.close()
    assert proxy.heads[0].startswith(b"GET http://engine.invalid:8000/metrics HTTP/1.1\r\n")
    assert (proxy.requests, direct.requests) == (1, 1)


def test_a_body_left_unread_closes_its_connection(served: list[RawServer], client: HttpClient) -> None:
    server = RawServer(lambda n: ok(b"up 1\n" * 200_000))  # 1 MB: more than one read
    served.append(server)
    assert fetch(client, server.url(), unread=True).startswith(b"up 1\n")
    assert server.closed_by_client.wait(5)  # closed, not left open to the garbage collector
    assert fetch(client, server.url()).startswith(b"up 1\n")
    assert server.connections == 2


def test_headers_are_bounded_in_total(served: list[RawServer], client: HttpClient) -> None:
    pad = b"a" * 4096
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Pad-%d: %s\r\n" % (n, pad) for n in range(20))
    served.append(RawServer(lambda n: head + b"Content-Length: 0\r\n\r\n"))
    served.append(RawServer(lambda n: b"HTTP/1.1 200 OK\r\nX-Long: " + b"v" * 70_000 + b"\r\n\r\n"))
    total, one_line = (refusal(client, server.url()) for server in served)
    assert total.reason == one_line.reason == "too_large"
    assert str(total).endswith(f"response headers over {MAX_HEADER_BYTES} bytes")


def test_a_refused_connection_a_silent_target_and_a_trickle_end_by_their_reasons(client: HttpClient) -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening: refused
        port = bound.getsockname()[1]
        refused = refusal(client, f"http://127.0.0.1:{port}/metrics")
    assert (refused.reason, str(refused)) == ("connection", f"http://127.0.0.1:{port}/metrics: connection refused")
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the backlog), never answers
    try:
        silent = refusal(client, f"http://127.0.0.1:{listener.getsockname()[1]}/metrics", timeout=0.5)
    finally:
        listener.close()
    assert (silent.reason, str(silent).endswith(": no response within 0.5s")) == ("timeout", True)
    stop = threading.Event()
    server = RouteServer({"/metrics": trickle(stop, "text/plain")})
    try:
        slow = refusal(client, server.url("/metrics"), timeout=0.5)
    finally:
        stop.set()
        server.close()
    assert (slow.reason, str(slow).endswith("/metrics: body not complete within 0.5s")) == ("timeout", True)


def test_cookies_a_target_sets_are_never_kept_nor_sent(served: list[RawServer], client: HttpClient) -> None:
    """Issue #41, finding 6: a target's cookies were kept and sent back without bound (the jar grew
    54 KB a scrape until the request head passed 1 MiB). A scraper needs none: none are kept."""
    server = RawServer(lambda n: ok(b"up 1\n", b"Set-Cookie: c%d=%s; Path=/\r\n" % (n, b"x" * 4000)))
    served.append(server)
    for _ in range(4):
        fetch(client, server.url())
    assert not [head for head in server.heads if b"Cookie" in head]
    assert max(len(head) for head in server.heads) < 1024


def test_secrets_in_the_query_and_userinfo_never_reach_an_error(client: HttpClient) -> None:
    """Issue #41: secrets in a URL's query string appeared in log lines and error texts."""
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        error = refusal(client, f"http://user:pw-s3cret@127.0.0.1:{port}/metrics?api_key=s3cret&format=text")
    assert "s3cret" not in str(error)
    assert str(error).startswith(f"http://127.0.0.1:{port}/metrics?api_key=xxxxx&format=xxxxx: ")
    assert redact("http://h:1/m") == "http://h:1/m"


# --- TLS options, as a Prometheus scrape config (and the report's --ca-file, --cert-file) states them --


@pytest.fixture(scope="module")
def mutual_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path, Path]]:
    """An HTTPS server on loopback that asks for a client certificate from its CA: (url, CA file,
    client certificate, client key)."""
    import ipaddress
    import ssl

    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    from tests.integration.test_web_config import CertificateAuthority

    directory = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(directory, "scrape-ca")
    san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server_cert = ca.issue("engine", san, ExtendedKeyUsageOID.SERVER_AUTH)
    client_cert = ca.issue("exporter", [x509.DNSName("exporter")], ExtendedKeyUsageOID.CLIENT_AUTH)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.path))
    context.load_cert_chain(server_cert.cert, server_cert.key)
    context.verify_mode = ssl.CERT_REQUIRED
    server = RouteServer({"/metrics": lambda handler: handler.wfile.write(ok(b"up 1\n"))})
    server._server.socket = context.wrap_socket(server._server.socket, server_side=True)
    server._server.handle_error = lambda request, address: None  # refused handshakes are the point
    yield f"https://127.0.0.1:{server.port}/metrics", ca.path, client_cert.cert, client_cert.key
    server.close()


def test_tls_options_verify_the_server_and_present_a_client_certificate(mutual_tls) -> None:
    from exporter.sources.http_environment import TlsOptions

    url, ca, cert, key = mutual_tls
    clients = {
        "ca and client certificate": HttpClient(
            tls=TlsOptions(ca_file=str(ca), cert_file=str(cert), key_file=str(key))
        ),
        "insecure, client certificate": HttpClient(
            tls=TlsOptions(cert_file=str(cert), key_file=str(key), insecure_skip_verify=True)
        ),
        "system store": HttpClient(tls=TlsOptions(cert_file=str(cert), key_file=str(key))),
        "no client certificate": HttpClient(tls=TlsOptions(ca_file=str(ca))),
    }
    try:
        assert fetch(clients["ca and client certificate"], url) == b"up 1\n"
        assert fetch(clients["insecure, client certificate"], url) == b"up 1\n"
        untrusted = refusal(clients["system store"], url)
        anonymous = refusal(clients["no client certificate"], url)
    finally:
        for client in clients.values():
            client.close()
    assert untrusted.reason == "connection" and "tls: certificate verify failed" in str(untrusted)
    assert anonymous.reason == "connection"
