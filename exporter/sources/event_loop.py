"""The process's one asyncio event loop, in a daemon thread: every outbound HTTP fetch runs on it.

Why one loop for the process: an aiohttp session and its kept-alive connections belong to the loop
that made them, and a source lives longer than a collection round (and than a reload's loop), so a
loop per round or per caller would leave each session unusable on the next. The collection loop,
discovery's thread, the prober and the sync callers (`once`, the report's Prometheus client, tests)
all hand their coroutines to this loop and wait for the answer (`run`), so nothing else needs to
know it exists.

The thread is a daemon: a fetch that a hostile target holds open can never keep the process from
exiting, and shutting down cancels what is in flight (`run`'s caller cancels its future).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def loop() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use."""
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            started = asyncio.new_event_loop()
            thread = threading.Thread(target=started.run_forever, name="event-loop", daemon=True)
            thread.start()
            _loop = started
        return _loop


def submit(coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule `coroutine` on the shared loop; cancelling the returned future cancels it there."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop())


def run(coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coroutine` on the shared loop and wait for its result (the sync facade).

    Not from the loop's own thread (it would wait for itself); `timeout` cancels the coroutine
    once passed and raises TimeoutError.
    """
    shared = loop()
    if on_loop_thread():
        coroutine.close()
        raise RuntimeError("event_loop.run called on the event loop's own thread")
    future = asyncio.run_coroutine_threadsafe(coroutine, shared)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise TimeoutError(f"not done within {timeout:g}s") from None
    except BaseException:
        future.cancel()  # interrupted (KeyboardInterrupt, a cancelled caller): stop it there too
        raise


def in_daemon_thread(name: str, function: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
    """`function(*args)` in a daemon thread of its own, for a coroutine to await
    (`asyncio.wrap_future`): blocking work kept off the loop. Not an executor's worker: the
    interpreter joins those at exit, so one call that does not return (a wedged GPU's NVML, a hung
    network mount) would hold the process past SIGTERM's grace period. Callers keep at most one in
    flight per purpose, so a call that stays blocked holds one thread, however long."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # handed to the awaiting coroutine, raised there
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def on_loop_thread() -> bool:
    """Whether the caller runs on the shared loop itself (where it must not wait for it)."""
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False
