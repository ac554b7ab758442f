"""`serve --web.config.file`: HTTPS with a test CA, basic auth with bcrypt, mutual TLS.

A CA, a server certificate for 127.0.0.1 and client certificates (one from the CA, one from a CA
the exporter does not trust) are made with `cryptography`; the real `serve` process uses them and
real clients (requests, ssl, a raw socket) connect to it on loopback.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from exporter.config import ConfigError
from exporter.webconfig import load_web_config
from tests.support import (
    REPO,
    REQUEST_BOUND_SECONDS,
    START_BOUND_SECONDS,
    closed_by_server,
    free_port,
    log_tail,
    open_idle,
    stop_group,
    wait_until,
    wait_until_serving,
)

pytestmark = pytest.mark.integration

USER, PASSWORD = "prometheus", "correct horse battery staple"


@dataclass
class Issued:
    cert: Path
    key: Path


class CertificateAuthority:
    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.name = subject
        self.cert = (
            self._builder(subject, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.path = directory / f"{name}.crt"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def _builder(self, subject: x509.Name, public_key: object) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(getattr(self, "name", subject))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    def issue(self, name: str, sans: list[x509.GeneralName], usage: x509.ObjectIdentifier) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            self._builder(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), key.public_key())
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        issued = Issued(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        issued.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        issued.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return issued


@dataclass
class Pki:
    ca: CertificateAuthority
    server: Issued
    client: Issued
    stranger: Issued  # a client certificate from a CA the exporter does not trust


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(directory, "test-ca")
    server = ca.issue(
        "exporter",
        [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
        ExtendedKeyUsageOID.SERVER_AUTH,
    )
    client = ca.issue("prometheus", [x509.DNSName("prometheus")], ExtendedKeyUsageOID.CLIENT_AUTH)
    stranger = CertificateAuthority(directory, "other-ca").issue(
        "intruder", [x509.DNSName("prometheus")], ExtendedKeyUsageOID.CLIENT_AUTH
    )
    return Pki(ca, server, client, stranger)


class TlsExporter:
    """`serve` with a web config on a free loopback port; ready once /healthz answers over HTTPS."""

    def __init__(
        self, web_config: Path, ca: Path, client: Issued | None = None, auth: tuple[str, str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.log_path = web_config.parent / f"exporter-{self.port}.log"
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--listen",
                f"127.0.0.1:{self.port}",
                "--gpu",
                "none",
                "--interval",
                "0.5",
                "--web.config.file",
                str(web_config),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
        cert = (str(client.cert), str(client.key)) if client else None

        def ready() -> bool:
            url = self.url + "/metrics"
            response = requests.get(url, verify=str(ca), cert=cert, auth=auth, timeout=REQUEST_BOUND_SECONDS)
            return response.status_code == 200

        try:
            wait_until_serving(self.process, ready, "exporter over HTTPS", self.log)
        except BaseException:
            self.close()
            raise

    def log(self) -> str:
        self._log.flush()
        return log_tail(self.log_path, 4000)

    def close(self) -> None:
        stop_group(self.process)
        self._log.close()


def write_web_config(directory: Path, text: str) -> Path:
    path = directory / "web-config.yml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def basic_auth_exporter(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsExporter]:
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    # Relative paths, as exporter-toolkit resolves them: against the web config's directory.
    directory = pki.server.cert.parent
    config = write_web_config(
        directory,
        f"""
tls_server_config:
  cert_file: {pki.server.cert.name}
  key_file: {pki.server.key.name}
http_server_config:
  headers:
    X-Content-Type-Options: nosniff
basic_auth_users:
  {USER}: {hashed}
""",
    )
    exporter = TlsExporter(config, pki.ca.path, auth=(USER, PASSWORD))
    yield exporter
    exporter.close()


def test_https_scrape_verified_against_the_test_ca_with_the_right_password(basic_auth_exporter, pki):
    response = requests.get(
        basic_auth_exporter.url + "/metrics",
        verify=str(pki.ca.path),
        auth=(USER, PASSWORD),
        timeout=REQUEST_BOUND_SECONDS,
    )
    assert response.status_code == 200
    assert "llm_exporter_build_info{" in response.text
    assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    "auth",
    [None, (USER, "wrong password"), ("mallory", PASSWORD), (USER, "")],
    ids=["missing", "wrong-password", "unknown-user", "empty-password"],
)
def test_missing_or_wrong_credentials_get_401(basic_auth_exporter, pki, auth):
    for path in ("/metrics", "/healthz", "/diagnosis"):
        response = requests.get(
            basic_auth_exporter.url + path, verify=str(pki.ca.path), auth=auth, timeout=REQUEST_BOUND_SECONDS
        )
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].startswith("Basic ")
        assert "llm_" not in response.text


def test_connections_idle_after_a_tls_handshake_make_way_for_a_scrape(basic_auth_exporter, pki):
    """Was: each held a thread and a descriptor for as long as the client liked."""
    context = ssl.create_default_context(cafile=str(pki.ca.path))
    # One at a time, each handshake complete before the next connection: idle *after* TLS.
    idle = [
        context.wrap_socket(open_idle(basic_auth_exporter.port, 1)[0], server_hostname="127.0.0.1") for _ in range(100)
    ]
    try:
        response = requests.get(
            basic_auth_exporter.url + "/metrics",
            verify=str(pki.ca.path),
            auth=(USER, PASSWORD),
            timeout=REQUEST_BOUND_SECONDS,
        )
        assert response.status_code == 200
        assert closed_by_server(idle, within=REQUEST_BOUND_SECONDS, enough=100 - 64) >= 100 - 64
    finally:
        for sock in idle:
            sock.close()


def test_plain_http_on_the_tls_port_gets_no_metrics(basic_auth_exporter):
    response = requests.get(
        basic_auth_exporter.url.replace("https://", "http://") + "/metrics",
        auth=(USER, PASSWORD),
        timeout=REQUEST_BOUND_SECONDS,
    )
    assert response.status_code == 400
    assert "HTTPS server" in response.text and "llm_" not in response.text
    # Nor does a raw request that ignores the answer's status: the connection is closed after it.
    with socket.create_connection(("127.0.0.1", basic_auth_exporter.port), timeout=REQUEST_BOUND_SECONDS) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.0 400 ") and b"llm_" not in received


def test_a_client_that_does_not_trust_the_server_certificate_is_not_served(basic_auth_exporter):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(
            basic_auth_exporter.url + "/metrics", auth=(USER, PASSWORD), timeout=REQUEST_BOUND_SECONDS
        )  # system CAs only


@pytest.fixture
def mtls_exporter(pki: Pki, tmp_path: Path) -> Iterator[TlsExporter]:
    config = write_web_config(
        tmp_path,
        f"""
tls_server_config:
  cert_file: {pki.server.cert}
  key_file: {pki.server.key}
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: {pki.ca.path}
  client_allowed_sans: [prometheus]
  min_version: TLS12
""",
    )
    exporter = TlsExporter(config, pki.ca.path, client=pki.client)
    yield exporter
    exporter.close()


def test_mutual_tls_serves_only_clients_with_a_certificate_from_the_client_ca(mtls_exporter, pki):
    url, ca = mtls_exporter.url + "/metrics", str(pki.ca.path)
    response = requests.get(
        url, verify=ca, cert=(str(pki.client.cert), str(pki.client.key)), timeout=REQUEST_BOUND_SECONDS
    )
    assert response.status_code == 200 and "llm_exporter_build_info{" in response.text
    # No certificate, one from an untrusted CA, and one from the CA without an allowed SAN.
    other_san = pki.ca.issue("grafana", [x509.DNSName("grafana")], ExtendedKeyUsageOID.CLIENT_AUTH)
    for cert in (None, (str(pki.stranger.cert), str(pki.stranger.key)), (str(other_san.cert), str(other_san.key))):
        with pytest.raises((requests.exceptions.SSLError, requests.exceptions.ConnectionError)):
            requests.get(url, verify=ca, cert=cert, timeout=REQUEST_BOUND_SECONDS)


def test_renewed_server_certificate_is_served_without_a_restart(pki, tmp_path):
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    cert.write_bytes(pki.server.cert.read_bytes())
    key.write_bytes(pki.server.key.read_bytes())
    config = write_web_config(tmp_path, f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n")
    exporter = TlsExporter(config, pki.ca.path)
    try:
        first = _served_certificate(exporter.port, pki.ca.path)
        renewed = pki.ca.issue(
            "exporter-renewed", [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))], ExtendedKeyUsageOID.SERVER_AUTH
        )
        key.write_bytes(renewed.key.read_bytes())
        cert.write_bytes(renewed.cert.read_bytes())
        wait_until(lambda: _served_certificate(exporter.port, pki.ca.path) != first, "the renewed certificate served")
        assert _served_certificate(exporter.port, pki.ca.path) == renewed.cert.read_bytes()
    finally:
        exporter.close()


def _served_certificate(port: int, ca: Path) -> bytes:
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_BOUND_SECONDS) as sock:
        with context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
            return ssl.DER_cert_to_PEM_cert(tls.getpeercert(binary_form=True)).encode()


@pytest.mark.parametrize(
    "text, key",
    [
        ("tls_server_config:\n  key_file: k.pem\n", "tls_server_config.cert_file"),
        (
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAnyClientCert\n",
            "tls_server_config.client_auth_type",
        ),
        (
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n"
            "  client_auth_type: RequireAndVerifyClientCert\n",
            "tls_server_config.client_ca_file",
        ),
        (
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            "tls_server_config.cipher_suites",
        ),
        (
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  min_version: SSL3\n",
            "tls_server_config.min_version",
        ),
        ("basic_auth_users:\n  alice: plaintext-password\n", "basic_auth_users.alice"),
        ("basic_auth_user:\n  alice: x\n", "basic_auth_user"),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "http_server_config.headers.X-Frame-Options"),
        ("rate_limit:\n  interval: soon\n", "rate_limit.interval"),
    ],
)
def test_invalid_web_config_names_the_key(tmp_path, text, key):
    path = write_web_config(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_web_config(str(path))
    assert str(raised.value).startswith(f"{path}: {key}: ")


def test_web_config_that_is_not_utf8_is_a_config_error(tmp_path):
    """Found by tests/fuzz/config_fuzzer.py: a Latin-1 file raised UnicodeDecodeError."""
    path = tmp_path / "web.yml"
    path.write_bytes(b"basic_auth_users:\n  caf\xe9: x\n")
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_web_config(str(path))


def test_serve_with_a_bad_web_config_exits_2_with_one_line(tmp_path):
    path = write_web_config(
        tmp_path, f"tls_server_config:\n  cert_file: {tmp_path}/missing.crt\n  key_file: {tmp_path}/missing.key\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--gpu",
            "none",
            "--web.config.file",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=START_BOUND_SECONDS,
    )
    assert result.returncode == 2
    assert "tls_server_config.cert_file" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_rate_limit_answers_429_past_the_burst(tmp_path):
    from exporter.webguard import WebGuard

    guard = WebGuard(str(write_web_config(tmp_path, "rate_limit:\n  interval: 1m\n  burst: 2\n")))
    assert [guard.refusal(None, "127.0.0.1") for _ in range(2)] == [None, None]
    refusal = guard.refusal(None, "127.0.0.1")
    assert refusal is not None and refusal[0] == 429
