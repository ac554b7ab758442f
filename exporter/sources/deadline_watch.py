"""One watchdog thread for every fetch's header deadline, instead of a Timer thread per fetch.

A `threading.Timer` per fetch started (and tore down) a thread on every scrape of every target:
~0.3 ms of CPU each, most of it `Thread.start` waiting for the new thread to say it runs. Here
one daemon thread sleeps until the earliest deadline of the fetches in flight, and a fetch only
pushes its deadline onto a heap and pops it (cancels) when its headers are in.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable


class Watch:
    """A pending call: `cancel()` before its deadline and it never runs."""

    __slots__ = ("deadline", "action", "cancelled")

    def __init__(self, deadline: float, action: Callable[[], None]) -> None:
        self.deadline = deadline
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class DeadlineWatchdog:
    """Runs each action at its monotonic deadline unless cancelled first, on one shared thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, seconds: float, action: Callable[[], None]) -> Watch:
        entry = Watch(self._clock() + seconds, action)
        with self._wake:
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (entry.deadline, next(self._order), entry))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="fetch-deadlines", daemon=True)
                self._thread.start()
            elif earliest is None or entry.deadline < earliest:
                self._wake.notify()
        return entry

    def pending(self) -> int:
        """Watches not yet run nor dropped (cancelled ones are dropped when they come due)."""
        with self._wake:
            return len(self._heap)

    def _run(self) -> None:
        while True:
            with self._wake:
                while True:
                    now = self._clock()
                    while self._heap and (self._heap[0][2].cancelled or self._heap[0][0] <= now):
                        _, _, entry = heapq.heappop(self._heap)
                        if not entry.cancelled:
                            break
                    else:
                        # nothing due: sleep until the earliest deadline (or a new, earlier one)
                        self._wake.wait(self._heap[0][0] - now if self._heap else None)
                        continue
                    break
            try:
                entry.action()
            except Exception:  # an action must not stop the watchdog for every other fetch
                pass


#: the process's one watchdog, shared by every `open_body`
WATCHDOG = DeadlineWatchdog()
