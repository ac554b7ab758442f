"""A restarting replica's own process on the wire (restarts.py), as a live node serves it.

vLLM's API server binds its port before it loads the model: while it loads, a connection is taken
into the kernel's backlog and nothing answers it. The host source finds the process listening on
the replica's port and reads its start time; the engine's scrape times out. That pair is what the
exporter calls `loading` (exporter/health/startup.py). This process does the same: it binds the
port at once, accepts nothing for `--load-seconds`, then answers every request with what the
simulator serves at the replica's own path (`--upstream`).

    python -m exporter.simulate.replica_process --port PORT --upstream URL --load-seconds S

`ReplicaProcess` is the simulator's side: one child per restarting replica, on one port for the
whole run (a Service's address does not move when its pod restarts), replaced at each restart.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

from exporter.simulate.http_serving import BACKLOG, TEXT_TYPE, address_family, base_url, http_server
from exporter.simulate.local_http import text

#: what the child's forwarded request may take (the simulator answers in milliseconds)
UPSTREAM_TIMEOUT_SECONDS = 10.0
STOP_SECONDS = 5.0
#: how often the child checks that the simulator that started it is still there
PARENT_CHECK_SECONDS = 1.0


class ReplicaProcess:
    """The child process of one replica, on `port` (chosen once: the first free one)."""

    def __init__(self, host: str, upstream: str) -> None:
        self.host, self.upstream = host, upstream
        with socket.socket(address_family(host), socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            self.port = probe.getsockname()[1]
        self.process: subprocess.Popen[bytes] | None = None
        #: the simulated start time of the replica process this child stands for
        self.started_at: float | None = None

    @property
    def url(self) -> str:
        return base_url(self.host, self.port) + "/metrics"

    def start(self, started_at: float, load_seconds: float) -> None:
        """A fresh child (the old one ended first), loading for `load_seconds`."""
        self.stop()
        command = [sys.executable, "-m", "exporter.simulate.replica_process", "--host", self.host]
        command += ["--port", str(self.port), "--upstream", self.upstream, "--load-seconds", f"{load_seconds:.3f}"]
        # In the simulator's process group: a test that stops the simulator's group stops it too.
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        self.started_at = started_at

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the simulator's URL of this replica's /metrics")
    parser.add_argument("--load-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    threading.Thread(target=_end_with_parent, args=(os.getppid(),), daemon=True).start()
    listener = socket.socket(address_family(args.host), socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.port))
    listener.listen(BACKLOG)
    time.sleep(args.load_seconds)  # "loading": bound, listening, accepting nothing
    # The socket bound while loading serves: there is no moment when the port is free.
    http_server(args.host, args.port, _Forward(args.upstream), listener).serve_forever()
    return 0


class _Forward:
    """Every path answers with the simulator's page of the replica (503 when it has none)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream

    def respond(self, path: str) -> tuple[int, str, bytes]:
        body = text(self.upstream, UPSTREAM_TIMEOUT_SECONDS)
        if body is None:
            return 503, "text/plain; charset=utf-8", b"the simulator did not answer for this replica\n"
        return 200, TEXT_TYPE, body.encode()


def _end_with_parent(parent: int) -> None:
    """A simulator killed outright cannot stop its children: they end when it has gone."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_SECONDS)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
