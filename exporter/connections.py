"""A bounded set of open connections for the HTTP server, so that no number of idle or slow
clients can starve a real scrape or run the process out of descriptors.

Each connection is either *waiting* (for a TLS handshake, for the next request on a keep-alive
connection, or for the rest of a request's headers), with a deadline, or *busy* (a request is
being answered, which takes milliseconds: every body is rendered beforehand). When all slots are
taken, a new connection evicts the connection that has been waiting longest with nothing unread,
since a scraper sends its request as soon as it connects while an idle or slowloris client is, by
then, the oldest waiter. Waiters past their deadline are shut down by `reap`, called from the accept loop.
"""

from __future__ import annotations

import array
import errno
import fcntl
import logging
import os
import resource
import socket
import termios
import threading
import time

log = logging.getLogger(__name__)

#: connections served at once; enough for Prometheus HA pairs, probes and people with curl
MAX_CONNECTIONS = 64
#: evicted connections may linger until their thread sees the shutdown; they get this many more slots
EVICTION_SLACK = 16
#: a new connection has this long to complete its TLS handshake or send its request's headers
HEADER_TIMEOUT_SECONDS = 10.0
#: a keep-alive connection is closed after this long without a request (Prometheus reconnects)
IDLE_TIMEOUT_SECONDS = 60.0
#: a response must be written within this long (a client that stops reading is cut off)
WRITE_TIMEOUT_SECONDS = 10.0
#: accept() errors that mean "no descriptors": retrying at once would spin the accept loop
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
MAX_ACCEPT_BACKOFF_SECONDS = 1.0


def connection_limit(maximum: int = MAX_CONNECTIONS) -> int:
    """At most a quarter of the descriptor limit: a TLS connection takes two descriptors (the
    handshake runs on a duplicate), and the sources, logs and libraries need the rest."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return maximum
    return max(4, min(maximum, (soft - EVICTION_SLACK) // 4))


class Slot:
    """One open connection: its descriptor (for shutdown from another thread) and its phase."""

    def __init__(self, fd: int, family: int) -> None:
        self.fd, self.family = fd, family
        self.deadline: float | None = time.monotonic() + HEADER_TIMEOUT_SECONDS  # None: busy
        self.since = time.monotonic()
        self.evicted = False

    def wait(self, seconds: float) -> None:
        """Waiting for the client (handshake, next request, rest of headers): evictable, with a deadline."""
        self.since = time.monotonic()
        self.deadline = self.since + seconds

    def busy(self) -> None:
        self.deadline = None


class ConnectionSlots:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._slots: dict[int, Slot] = {}
        self.evictions = 0

    def admit(self, sock: socket.socket) -> Slot | None:
        """A slot for this new connection, evicting the longest waiter when all are taken; None
        when every slot is busy (the caller closes the connection)."""
        with self._lock:
            live = [slot for slot in self._slots.values() if not slot.evicted]
            if len(live) >= self.limit:
                waiting = [slot for slot in live if slot.deadline is not None]
                if not waiting or len(self._slots) >= self.limit + EVICTION_SLACK:
                    return None
                self._evict(_victim(waiting))
            slot = self._slots[sock.fileno()] = Slot(sock.fileno(), sock.family)
            return slot

    def of(self, fd: int) -> Slot:
        """The slot of the open connection on descriptor `fd`."""
        with self._lock:
            return self._slots[fd]

    def release_fd(self, fd: int) -> None:
        """Before the socket is closed: its descriptor number may be reused right after. Idempotent
        (-1, a closed socket's number, is never a key)."""
        with self._lock:
            self._slots.pop(fd, None)

    def reap(self) -> None:
        """Shut down the waiters past their deadline."""
        now = time.monotonic()
        with self._lock:
            for slot in self._slots.values():
                if not slot.evicted and slot.deadline is not None and slot.deadline < now:
                    self._evict(slot)

    def __len__(self) -> int:
        return len(self._slots)

    def _evict(self, slot: Slot) -> None:
        """Shut the socket down (held lock: the descriptor is still this connection's). Its thread's
        blocked read then returns, and the thread closes the socket and releases the slot."""
        slot.evicted = True
        self.evictions += 1
        try:
            with socket.fromfd(slot.fd, slot.family, socket.SOCK_STREAM) as duplicate:
                duplicate.shutdown(socket.SHUT_RDWR)
        except OSError as exc:  # already gone, or no descriptor for the duplicate
            log.debug("evicting connection %d: %s", slot.fd, exc)


def _victim(waiting: list[Slot]) -> Slot:
    """The longest waiter with nothing unread: one whose request has arrived (its thread has not
    read it yet, on a busy machine) is a scrape about to be served, not an idle client."""
    by_age = sorted(waiting, key=lambda slot: slot.since)
    return next((slot for slot in by_age if not _unread_bytes(slot.fd)), by_age[0])


def _unread_bytes(fd: int) -> int:
    count = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, count)
    except OSError:
        return 0
    return count[0]


class DescriptorReserve:
    """One descriptor held back, so that when accept() fails for lack of descriptors the pending
    connection can still be accepted and closed, rather than left to wake the accept loop again at
    once (a busy loop); the loop then backs off, doubling up to a second, as Go's net/http does."""

    def __init__(self) -> None:
        self._fd: int | None = os.open(os.devnull, os.O_RDONLY)
        self.backoff = 0.0

    def shed(self, listener: socket.socket) -> None:
        """Close the reserve, accept and close one pending connection, take the reserve back, wait."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            connection, _address = listener.accept()
            connection.close()
        except OSError:
            pass
        try:
            self._fd = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            self._fd = None
        self.backoff = min(MAX_ACCEPT_BACKOFF_SECONDS, max(0.005, self.backoff * 2))
        log.warning("out of file descriptors accepting connections; retrying in %gs", self.backoff)
        time.sleep(self.backoff)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
