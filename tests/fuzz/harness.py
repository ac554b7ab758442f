"""Running an atheris harness: libFuzzer's command line, with seeds a harness names.

Each `*_fuzzer.py` defines `test_one_input(data: bytes)` and calls `run(test_one_input)`. Run one
by hand, for as long as you like (artifacts of a crash are written to the current directory):

    .venv/bin/python tests/fuzz/exposition_fuzzer.py -max_total_time=600 /tmp/corpus tests/fixtures/engines

tests/integration/test_fuzz_atheris.py runs each for a few seconds in CI. Why atheris next to
hypothesis: libFuzzer follows the branches its inputs reach (the parsers are instrumented), so it
walks into code paths no hand-written strategy thought of; hypothesis covers structure we know.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import atheris


def run(test_one_input: Callable[[bytes], None]) -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
