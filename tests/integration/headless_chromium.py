"""Debian's real `chromium`, headless, loading a page through a loopback proxy that logs requests.

Every request the browser makes, to any host and any scheme (plain requests and HTTPS CONNECTs),
goes to the proxy: `--proxy-bypass-list=<-loopback>` removes Chromium's implicit loopback bypass,
so a page that fetches anything at view time shows it in `requests`. The page itself is served
at http://report.test/PATH by the proxy; console messages come back through Chromium's log.
"""

from __future__ import annotations

import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support import stop_group

PAGE_HOST = "report.test"


class LoggingProxy:
    """Serves the files of one folder as http://report.test/NAME and logs every request."""

    def __init__(self, folder: Path) -> None:
        self.requests: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                owner.requests.append(f"{self.command} {self.path}")
                prefix = f"http://{PAGE_HOST}/"
                path = folder / self.path[len(prefix) :] if self.path.startswith(prefix) else None
                if path is None or not path.is_file():
                    self.send_error(404)
                    return
                body = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = _serve  # noqa: N815 - http.server API
            do_POST = _serve  # noqa: N815
            do_CONNECT = _serve  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.address = f"127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def chromium(
    proxy: LoggingProxy, profile: Path, url: str, *mode: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on `url` with `mode` (`--dump-dom`, `--screenshot=FILE`, ...)."""
    binary = next((b for b in ("chromium", "chromium-browser") if _which(b)), None)
    if binary is None:
        pytest.fail("chromium not found on PATH: apt-get install -y chromium (scripts/test does)", pytrace=False)
    command = [
        binary,
        "--headless",
        "--no-sandbox",  # root in CI containers
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={profile}",
        f"--proxy-server=http://{proxy.address}",
        "--proxy-bypass-list=<-loopback>",
        "--enable-logging=stderr",
        "--log-level=0",
        *mode,
        url,
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, env={**os.environ}
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        stop_group(process)  # helpers (zygote, utility processes) the browser left in its group too
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _which(name: str) -> bool:
    return any((Path(d) / name).is_file() for d in os.environ.get("PATH", "").split(os.pathsep))


def console_lines(stderr: str) -> list[str]:
    """The page's console messages from Chromium's log (`CONSOLE(line)] "text", source: ...`)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "CONSOLE(" in line]
