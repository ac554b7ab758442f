"""Stopping a child process and everything it started (the demo's companions, test servers).

Children are started with `start_new_session=True`, so each leads its own process group and a
signal to the group reaches the grandchildren too (vLLM's engine core, Prometheus' helpers).
"""

from __future__ import annotations

import os
import signal
import subprocess


def terminate_group(process: subprocess.Popen[bytes]) -> None:
    """Stop a child started in its own session, and everything it started: TERM, then KILL."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
