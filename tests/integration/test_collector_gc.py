"""`serve` sets the garbage collector for its long life once its sources are built
(exporter/collector_gc.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from exporter.collector_gc import YOUNG_THRESHOLD
from tests.support import free_port

REPO = Path(__file__).resolve().parents[2]

# `serve` in the child's main thread (it installs its signal handlers there); a watcher thread
# reports the collector's settings once serve has changed them and stops serve with SIGTERM.
_CHILD = textwrap.dedent(
    """
    import gc, json, os, signal, sys, threading, time
    from exporter.cli import main

    before = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}

    def watch():
        deadline = time.monotonic() + 60
        while gc.get_threshold() == before["threshold"] and time.monotonic() < deadline:
            time.sleep(0.05)
        after = {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}
        print(json.dumps({"before": before, "after": after}), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()
    sys.exit(main(sys.argv[1:]))
    """
)


def test_serve_freezes_what_start_up_built_and_widens_the_young_generation(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/metrics"  # nothing listens: the source is down, serve runs
    listen = f"127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, "serve", "--listen", listen, "--engine", f"vllm={dead}", "--interval", "30"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    before, after = report["before"], report["after"]
    assert before["frozen"] == 0 and before["threshold"][0] != YOUNG_THRESHOLD
    assert after["threshold"] == [YOUNG_THRESHOLD, *before["threshold"][1:]]
    # start-up's objects: the modules, classes and configuration serve imported and built
    assert after["frozen"] > 10_000
