"""Real gateways in front of a real engine, on loopback: HAProxy (Debian, its built-in Prometheus
exporter on), the LiteLLM proxy (PyPI, its Prometheus callback on), and a delaying TCP proxy
that stands for a slow client network.

Each binds 127.0.0.1 on free ports, writes its files under a temporary directory and stops its
own process group.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import requests

from exporter.process_group import terminate_group
from tests.support import free_port

HAPROXY = "/usr/sbin/haproxy"


def _wait_http(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: exited {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            if requests.get(url, timeout=2).status_code < 500:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready within {timeout_s:g}s:\n{log.read_text(errors='replace')[-3000:]}")


class Haproxy:
    """HAProxy: `frontend llm` → `backend engines` (one server), stats on its own frontend.

    `log_port`: send the access log (`option httplog`) as syslog over UDP to 127.0.0.1 on that
    port, the prober's requests left out (they are not the clients'), and stream without delay, as
    docs/slo.md configures it."""

    def __init__(
        self, engine_port: int, *, server_maxconn: int = 64, queue_timeout: str = "30s", log_port: int | None = None
    ) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="haproxy-"))
        self.port = free_port()
        self.stats_port = free_port()
        logging = "" if log_port is None else f"  log 127.0.0.1:{log_port} local0\n"
        # With its access log judged against what clients see, HAProxy must also pass streamed tokens
        # on as they come: without http-no-delay it holds small writes for the client's ACK (Nagle),
        # time its own timers never see (docs/slo.md).
        log_defaults = "" if log_port is None else "  log global\n  option httplog\n  option http-no-delay\n"
        silent_probes = (
            ""
            if log_port is None
            else "  http-request set-log-level silent if { req.hdr(user-agent) -m beg llm-bottleneck-exporter-probe }\n"
        )
        config = f"""
global
  maxconn 256
{logging}defaults
{log_defaults}  mode http
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  timeout queue {queue_timeout}
frontend stats
  bind 127.0.0.1:{self.stats_port}
  http-request use-service prometheus-exporter if {{ path /metrics }}
frontend llm
  bind 127.0.0.1:{self.port}
{silent_probes}  default_backend engines
backend engines
  server engine 127.0.0.1:{engine_port} maxconn {server_maxconn} check inter 1s fall 2 rise 1
"""
        (self.dir / "haproxy.cfg").write_text(config)
        self.log_path = self.dir / "haproxy.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [HAPROXY, "-db", "-f", str(self.dir / "haproxy.cfg")],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _wait_http(self.metrics_url, self.proc, self.log_path, 20)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.stats_port}/metrics"

    def close(self) -> None:
        terminate_group(self.proc)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Litellm:
    """The LiteLLM proxy routing model `name` to an OpenAI-compatible engine at `api_base`.

    LiteLLM refuses to start without a master key, and its /metrics asks for it too: clients,
    the prober (`bearer_token_file`) and the exporter's scrape send it."""

    def __init__(self, python: Path, api_base: str, model: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="litellm-"))
        self.port = free_port()
        self.master_key = "sk-" + secrets.token_hex(16)
        self.key_file = self.dir / "master-key"
        self.key_file.write_text(self.master_key)
        (self.dir / "config.yaml").write_text(
            f"""model_list:
  - model_name: {model}
    litellm_params:
      model: hosted_vllm/{model}
      api_base: {api_base}/v1
      api_key: none
litellm_settings:
  callbacks: ["prometheus"]
general_settings:
  master_key: {self.master_key}
"""
        )
        self.log_path = self.dir / "litellm.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [str(python), "-m", "litellm.proxy.proxy_cli", "--config", str(self.dir / "config.yaml")]
            + ["--host", "127.0.0.1", "--port", str(self.port), "--num_workers", "1"],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            env={"PATH": "/usr/bin:/bin", "HOME": str(self.dir), "LITELLM_LOG": "ERROR", "NO_DOCS": "True"},
            start_new_session=True,
        )
        _wait_http(self.base_url + "/health/liveliness", self.proc, self.log_path, 180)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return self.base_url + "/metrics/"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.master_key}"}

    def close(self) -> None:
        terminate_group(self.proc)
        self._log.close()


class DelayingProxy:
    """A TCP proxy on loopback standing for a slow client network: each connection waits
    `delay_s` before it reaches the upstream (a slow handshake) and every chunk back to the client
    is held `delay_s` (a long path back). The upstream sees a fast client; the client, every
    request slower whatever the load."""

    def __init__(self, upstream_port: int, delay_s: float) -> None:
        self.delay_s = delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._upstream_port = upstream_port
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        time.sleep(self.delay_s)
        try:
            upstream = socket.create_connection(("127.0.0.1", self._upstream_port), timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        threading.Thread(target=self._pipe, args=(client, upstream, 0.0), daemon=True).start()
        threading.Thread(target=self._pipe, args=(upstream, client, self.delay_s), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket, delay_s: float) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if delay_s:
                    time.sleep(delay_s)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
