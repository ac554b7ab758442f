"""Suite-wide fixtures, and what keeps the run from leaving anything behind.

Every process a test starts inherits SUITE_MARK (a value unique to this run). Fixtures stop their
processes themselves (tests/support.py `stop_group`, in finalizers that also run when the test
fails); at the end of the session whatever still carries the mark is a leak: it is killed, listed,
and the run fails. Temporary files of the run, its processes' included (TMPDIR), go to a folder of
pytest's own base directory, which pytest rotates like `tmp_path`; files that still appear in the
shared temporary directory during the run are listed at the end.
"""

from __future__ import annotations

import atexit
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.raw_server import RawServer
from tests.support import SUITE_MARK, RouteServer

#: where files of the run would outlive it: the shared temporary directory and shared memory
#: (a vLLM engine killed mid-run leaves its segments there)
_SHARED_DIRS = tuple(path for path in (Path(tempfile.gettempdir()), Path("/dev/shm")) if path.is_dir())
_state: dict[str, object] = {}


def _shared_entries() -> set[Path]:
    return {directory / name for directory in _SHARED_DIRS for name in os.listdir(directory)}


def _marked_processes() -> list[psutil.Process]:
    """Live processes started by this run (they inherited the mark), not this one."""
    mark, found = os.environ.get(SUITE_MARK), []
    for process in psutil.process_iter():
        try:
            if (
                process.pid != os.getpid()
                and process.status() != psutil.STATUS_ZOMBIE
                and process.environ().get(SUITE_MARK) == mark
            ):
                found.append(process)
        except psutil.Error:
            continue
    return found


def _kill_left_behind() -> list[str]:
    """SIGKILL what this run started and left running; their descriptions."""
    left = _marked_processes()
    described = []
    for process in left:
        try:
            described.append(f"pid {process.pid}: {' '.join(process.cmdline())[:300]}")
            process.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(left, timeout=10)
    return described


def _interrupt(signum: int, frame: object) -> None:
    # A CI timeout or an operator sends SIGTERM: end the way Ctrl-C does, so fixtures' finalizers
    # and the sweep run instead of the processes outliving the run.
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SUITE_MARK] = f"{os.getpid()}-{uuid.uuid4().hex}"  # a fresh one for a nested run too
    _state["shared_before"] = _shared_entries()
    atexit.register(_kill_left_behind)  # a backstop for an exit that skips pytest_sessionfinish
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


@pytest.hookimpl(trylast=True)  # after pytest's own teardown of what is still set up (an interrupted run)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = _kill_left_behind()
    _state["left"] = left
    if left and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    before = _state.get("shared_before", set())
    assert isinstance(before, set)
    _state["new_shared"] = sorted(path for path in _shared_entries() - before if not path.name.startswith("pytest-of-"))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    left = _state.get("left") or []
    if left:
        terminalreporter.section("processes left behind by the tests (killed; the run fails)", red=True)
        for line in left:  # type: ignore[union-attr]
            terminalreporter.line(line)
    new_shared = _state.get("new_shared") or []
    if new_shared:
        where = " and ".join(str(d) for d in _SHARED_DIRS)
        terminalreporter.section(f"new in {where} during this run", yellow=True)
        terminalreporter.line(
            "The run's own processes write to TMPDIR (a folder of pytest's base directory), so these"
            " came from a path written into a program, or from a neighbour on this machine:"
        )
        for path in new_shared:  # type: ignore[union-attr]
            terminalreporter.line(f"  {path}")


@pytest.fixture(scope="session", autouse=True)
def run_temp_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's temporary directory, under pytest's base (kept for the last runs like tmp_path):
    TMPDIR for the processes tests start (an exporter's log, a compiler's cache, a browser's
    profile), tempfile's directory for this process."""
    path = tmp_path_factory.mktemp("tmp", numbered=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TMPDIR", str(path))
        patch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        yield path


@pytest.fixture
def route_server():
    server = RouteServer()
    yield server
    server.close()


@pytest.fixture
def served() -> Iterator[list[RawServer]]:
    """Raw-socket servers a test starts (tests/raw_server.py), closed after it."""
    servers: list[RawServer] = []
    yield servers
    for server in servers:
        server.close()
