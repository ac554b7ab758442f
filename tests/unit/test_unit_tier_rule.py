"""The unit tier's rule (tests/unit/conftest.py) holds: every way to start a process is refused."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys

import pytest

REFUSED = "tests/unit runs in-process only"


def test_subprocess_is_refused_naming_the_rule():
    with pytest.raises(AssertionError, match=REFUSED):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    with pytest.raises(AssertionError, match=REFUSED):
        subprocess.check_output(["true"])


def test_fork_is_refused():
    with pytest.raises(AssertionError, match=REFUSED):
        if os.fork() == 0:  # reached only if the guard failed: the child leaves at once
            os._exit(0)


@pytest.mark.parametrize("method", ["spawn", "forkserver", "fork"])
def test_multiprocessing_is_refused(method):
    with pytest.raises(AssertionError, match=REFUSED):
        process = multiprocessing.get_context(method).Process(target=print)
        process.start()
        process.join()


def test_os_system_is_refused():
    with pytest.raises(AssertionError, match=REFUSED):
        os.system("true")
