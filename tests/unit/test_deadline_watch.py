"""The shared fetch-deadline watchdog: due actions run, cancelled ones never, one thread for all."""

from __future__ import annotations

import threading
import time

from exporter.sources.deadline_watch import DeadlineWatchdog


def wait_for(predicate, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_due_actions_run_in_deadline_order_and_cancelled_ones_never() -> None:
    watchdog = DeadlineWatchdog()
    ran: list[str] = []
    late = watchdog.watch(0.3, lambda: ran.append("late"))
    cancelled = watchdog.watch(0.05, lambda: ran.append("cancelled"))
    watchdog.watch(0.1, lambda: ran.append("early"))  # earlier than the one the thread sleeps on
    cancelled.cancel()
    assert wait_for(lambda: len(ran) == 2)
    assert ran == ["early", "late"]
    assert not late.cancelled
    assert wait_for(lambda: watchdog.pending() == 0)
    assert ran == ["early", "late"]


def test_many_watches_share_one_thread_and_a_failing_action_stops_nothing() -> None:
    watchdog = DeadlineWatchdog()
    before = threading.active_count()
    ran = threading.Event()

    def fail() -> None:
        raise RuntimeError("boom")

    watchdog.watch(0.01, fail)
    watches = [watchdog.watch(30, lambda: None) for _ in range(200)]
    assert threading.active_count() <= before + 1
    watchdog.watch(0.05, ran.set)
    assert ran.wait(10)
    for watch in watches:
        watch.cancel()
