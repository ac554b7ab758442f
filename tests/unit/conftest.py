"""The unit tier's one rule: tests run in this process, never start another.

`pytest tests/unit` is the inner loop, and child processes (a compiler, a linter, a fuzzer, a
stand-in engine, the real `serve`) are what made it take minutes. A test that needs one belongs
in tests/integration, which the main tier (`pytest -m "not vllm"`) runs as well. So while a unit
test (or a fixture it uses) is set up, runs or is torn down, every way to start a process raises
ChildProcessInUnitTest instead: a new test that starts one fails loudly, naming the rule.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class ChildProcessInUnitTest(AssertionError):
    """A unit test tried to start a process."""


def _refuse(what: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise ChildProcessInUnitTest(
            f"{what} in a unit test: tests/unit runs in-process only; a test that starts a process "
            "belongs in tests/integration (see tests/unit/conftest.py)"
        )

    return refuse


# Every door to a new process: subprocess (run, Popen, check_output...) goes through
# Popen._execute_child; multiprocessing's spawn and forkserver through _posixsubprocess.fork_exec,
# its fork start method and any direct fork through os.fork.
_DOORS: list[tuple[Any, str, str]] = [
    (subprocess.Popen, "_execute_child", "subprocess.Popen"),
    (_posixsubprocess, "fork_exec", "_posixsubprocess.fork_exec"),
    *((os, name, f"os.{name}") for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system")),
]


@contextmanager
def no_child_processes() -> Iterator[None]:
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in _DOORS if hasattr(owner, name)]
    try:
        for owner, name, what in _DOORS:
            if hasattr(owner, name):
                setattr(owner, name, _refuse(what))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


# Setup and teardown too: a module-scoped fixture that compiles or starts something is caught.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with no_child_processes():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with no_child_processes():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with no_child_processes():
        return (yield)
