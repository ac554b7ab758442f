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
from collections.abc import Coroutine
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


def on_loop_thread() -> bool:
    """Whether the caller runs on the shared loop itself (where it must not wait for it)."""
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False
