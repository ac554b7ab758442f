"""A raw-socket HTTP/1.1 server for the HTTP client's tests: it counts connections and answers
exactly the bytes a misbehaving target sends (a short body, a stale kept-alive connection, trailer
lines that never end). Loopback only."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable

# request number (from 0) -> the raw bytes answered, at once or piece by piece (an iterable that
# may pause between pieces: a stream that a client cutting it short stops)
Reply = Callable[[int], bytes | Iterable[bytes]]


class RawServer:
    """Answers each request on each connection with `reply(n)`; closes a connection after the
    reply when `close_after` says so. Counts connections accepted and requests read."""

    def __init__(self, reply: Reply, close_after: Callable[[int], bool] = lambda n: False) -> None:
        self.reply, self.close_after = reply, close_after
        self.connections = 0
        self.requests = 0
        self.heads: list[bytes] = []  # each request's line and headers, as they came
        self.closed_by_client = threading.Event()  # set when a client closed a connection
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            pending = b""
            while True:
                while b"\r\n\r\n" not in pending:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        self.closed_by_client.set()
                        return
                    pending += data
                head, pending = pending.split(b"\r\n\r\n", 1)
                self.heads.append(head + b"\r\n\r\n")
                number = self.requests
                self.requests += 1
                reply = self.reply(number)
                try:
                    for piece in [reply] if isinstance(reply, bytes) else reply:
                        conn.sendall(piece)
                except OSError:  # the client closed with the reply unread (a reset)
                    self.closed_by_client.set()
                    return
                if self.close_after(number):
                    return

    def close(self) -> None:
        self._listener.close()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)
