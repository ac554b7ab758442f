"""The demo's screen as a user meets it: one frame for a fixed /diagnosis document and status must fit
the terminal and name, per engine, the primary stage with evidence and an action; the plain mode
must be one clean line per frame."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len
from rich.console import Console, Group

from exporter.simulate.cells import MISSING, crop, engine_set, number, span
from exporter.simulate.demo import _firing_pages, _pending_alerts, rdma_idle_reason, summarize_stderr
from exporter.simulate.frame import DemoStatus, Page, frame_text, plain_line, render_frame
from exporter.simulate.scenario import load_scenario
from exporter.simulate.view import ExporterReading

ENGINES = [f"vllm-codellama-13b-{i}" for i in range(8)]
STAGES = ("queueing", "prefill_compute", "decode_memory_bandwidth", "kv_cache_capacity")
THRESHOLDS = {"enter_score": 0.6, "exit_score": 0.4}

DECODE_EVIDENCE = "DRAM active 0.95 with SM active 0.45 (practical DRAM peak ~0.8)"
DECODE_ACTION = "enable prefix caching to cut KV reads and recomputation"
KV_EVIDENCE = "KV-cache usage up to 0.97 (critical 0.95) with 14.0 requests waiting"
KV_ACTION = "raise the KV-cache share (--gpu-memory-utilization) or quantize the KV cache (fp8)"


def _engine(name: str, primary: str, score: float, evidence: str, actions: list[str]) -> dict:
    scores = dict.fromkeys(STAGES, 0.1)
    if primary != "none":
        scores[primary] = score
    return {
        "engine": name,
        "engine_type": "vllm",
        "model": "codellama/CodeLlama-13b-hf",
        "primary": primary,
        "scores": scores,
        "active": [] if primary == "none" else [primary],
        "evidence": [f"{primary if primary != 'none' else 'queueing'} {score:.2f}: {evidence}", "queueing 0.10: x"],
        "actions": actions,
    }


def _diagnosis() -> dict:
    """Six engines decode-bound, one KV-bound, one with no bottleneck: the long-template phase."""
    engines = []
    for index, name in enumerate(ENGINES):
        if index == 3:
            engines.append(_engine(name, "kv_cache_capacity", 0.71, KV_EVIDENCE, [KV_ACTION]))
        elif index == 6:
            engines.append(_engine(name, "none", 0.1, "1.0 requests waiting on average (threshold 5)", []))
        else:
            evidence = DECODE_EVIDENCE if index == 4 else "DRAM active 0.90 with SM active 0.50"
            actions = [DECODE_ACTION, "cap --max-model-len (e.g. 4096) so long contexts do not dominate"]
            engines.append(_engine(name, "decode_memory_bandwidth", 0.9 if index == 4 else 0.7, evidence, actions))
    return {"generated_at": "2026-12-01T00:00:00+00:00", "engines": engines, "thresholds": THRESHOLDS}


def _reading() -> ExporterReading:
    reading = ExporterReading()
    for index, name in enumerate(ENGINES):
        reading.engines[name] = {"running": 14.0, "waiting": 2.0 * index, "kv": 0.93, "ttft_p95": 3.2}
        reading.gpus[str(index)] = {"sm": 0.45, "dram": 0.95, "engine": name}
        reading.ports[f"mlx5_{index}/1"] = {"tx": 0.0, "rx": 0.0}
    return reading


def _status(**changes) -> DemoStatus:
    fields = {
        "scenario": "prompt-growth",
        "simulated_seconds": 214.0,
        "phase": "long-template",
        "phase_number": 2,
        "phase_count": 3,
        "expected_stage": "decode_memory_bandwidth",
        "secondary_stages": ("kv_cache_capacity", "queueing"),
        "note": "the template grows to 700 tokens (mean input 800); running falls, waiting grows, DRAM saturated",
        "exporter_url": "http://127.0.0.1:9477",
        "simulator_url": "http://127.0.0.1:41481",
        "prometheus_url": "http://127.0.0.1:53709",
        "alertmanager_url": "http://127.0.0.1:40111",
        "pages": (
            Page("LLMDecodeMemoryBandwidthSaturated", "critical", ENGINES[0]),
            Page("LLMDecodeMemoryBandwidthSaturated", "critical", ENGINES[1]),
            Page("LLMKVCacheSaturated", "warning", ENGINES[3]),
        ),
        "pending_alerts": ("LLMKVCacheSaturated",) * 3 + ("LLMTimeToFirstTokenP99High",),
    }
    return DemoStatus(**{**fields, **changes})


def _screen(width: int, height: int, diagnosis: dict | None = None, **status) -> list[str]:
    lines = render_frame(_status(**status), _reading(), diagnosis or _diagnosis(), width, height)
    return frame_text(lines).split("\n")


def test_the_frame_fits_80x24_and_names_each_engines_stage_with_evidence_and_action():
    screen = _screen(80, 24)
    assert len(screen) <= 24
    assert max(cell_len(line) for line in screen) <= 80
    text = "\n".join(screen)
    for engine in _diagnosis()["engines"]:
        row = next(line for line in screen if line.startswith(engine["engine"] + " "))
        assert row.rstrip().endswith(engine["primary"]), row
    # the strongest decode-bound engine's evidence (cropped to the width) and first action
    why = next(line for line in screen if line.lstrip().startswith("why") and "decode" not in line and "0.90" in line)
    assert "vllm-codellama-13b-4 0.90: DRAM active 0.95" in why
    assert DECODE_ACTION in text
    assert "vllm-codellama-13b-3 0.71: KV-cache usage up to 0.97" in text  # the KV-bound engine: its own block
    assert KV_ACTION[:60] in text
    assert "decode_memory_bandwidth on vllm-codellama-13b-{0,1,2,4,5,7} · expected" in text
    assert "kv_cache_capacity on vllm-codellama-13b-3 · expected secondary" in text
    assert "no bottleneck on vllm-codellama-13b-6: nearest queueing 0.10 (enters at 0.6)" in text


def test_the_frame_says_the_phase_pages_and_where_to_look_next():
    text = "\n".join(_screen(80, 24))
    assert "phase 2/3 long-template: expects decode_memory_bandwidth" in text
    assert "critical LLMDecodeMemoryBandwidthSaturated on vllm-codellama-13b-{0,1}" in text
    assert "warning LLMKVCacheSaturated on vllm-codellama-13b-3" in text
    everywhere = tuple(Page("LLMKVCacheSaturated", "critical", name) for name in ENGINES[:3])
    assert "LLMKVCacheSaturated on vllm-codellama-13b-{0,1,2}" in "\n".join(_screen(80, 24, pages=everywhere))
    assert "http://127.0.0.1:9477/diagnosis" in text and "http://127.0.0.1:53709/alerts" in text
    assert "dashboards/generated/bottleneck-diagnosis.json" in text
    assert "(no cross-node traffic in this scenario)" in text  # the RDMA row says why it reads zero
    assert "warning LLMKVCacheSaturated on vllm-codellama-13b-3 · 4 pending" in text
    quiet = "\n".join(_screen(80, 24, pages=()))
    assert "pages  none firing · pending LLMKVCacheSaturated ×3, LLMTimeToFirstTokenP99High" in quiet


@pytest.mark.parametrize("width", [80, 100, 132, 200])
@pytest.mark.parametrize("height", [24, 30, 50])
def test_every_size_from_80x24_up_fits_and_a_wider_one_shows_more(width, height):
    screen = _screen(width, height)
    assert len(screen) <= height and max(cell_len(line) for line in screen) <= width
    assert ("DRAM" in screen[[i for i, line in enumerate(screen) if line.startswith("engine")][0]]) == (width >= 100)
    if height >= 30:  # room for the second action of the strongest group
        assert "cap --max-model-len" in "\n".join(screen)


def test_more_stage_groups_than_rows_are_summarised_not_scrolled():
    diagnosis = _diagnosis()
    stages = ("queueing", "prefill_compute", "host_overhead", "cross_node_communication", "kv_cache_capacity")
    for engine, stage in zip(diagnosis["engines"], stages):
        engine.update(primary=stage, scores={**engine["scores"], stage: 0.8}, evidence=[f"{stage} 0.80: because"])
    screen = _screen(80, 24, diagnosis)
    assert len(screen) <= 24 and max(cell_len(line) for line in screen) <= 80
    assert any(re.match(r"… \d more stage group\(s\): see /diagnosis", line) for line in screen)
    assert screen[-1].strip().startswith("Grafana")  # what to look at next is never pushed off


def test_before_the_first_diagnosis_and_without_alertmanager_the_frame_still_fits():
    lines = render_frame(_status(alertmanager_url=None, pages=None), ExporterReading(), None, 80, 24)
    screen = frame_text(lines).split("\n")
    assert len(screen) <= 24 and max(cell_len(line) for line in screen) <= 80
    text = "\n".join(screen)
    assert "/diagnosis not answering yet" in text and "Alertmanager not running" in text


def test_the_frame_draws_in_a_terminal_console_within_its_size():
    console = Console(width=80, height=24, record=True, force_terminal=True, color_system="truecolor")
    console.print(Group(*render_frame(_status(), _reading(), _diagnosis(), 80, 24)))
    exported = console.export_text().rstrip("\n").split("\n")
    assert len(exported) <= 24 and max(cell_len(line) for line in exported) <= 80


def test_until_the_window_fills_the_frame_says_the_verdicts_are_settling():
    """The first ~minute of a phase still weighs the previous one (the exporter's 60 s window): the
    expected secondary stage leading there is the window, not a wrong verdict, and the frame says so."""
    filling = _screen(80, 24, phase_seen_seconds=25.0, window_seconds=60.0)
    assert filling[1].startswith("  window filling 25/60s, verdicts settling · secondary kv_cache_capacity")
    assert len(filling) <= 24 and max(cell_len(line) for line in filling) <= 80
    line = plain_line(_status(phase_seen_seconds=25.0, window_seconds=60.0), _reading(), _diagnosis())
    assert " window_filling=25/60s " in line
    filled = _status(phase_seen_seconds=60.0, window_seconds=60.0)
    assert "window" not in "\n".join(_screen(80, 24, phase_seen_seconds=60.0, window_seconds=60.0)[:3])
    assert "window_filling" not in plain_line(filled, _reading(), _diagnosis())


def test_plain_mode_is_one_line_per_frame_without_escape_sequences():
    line = plain_line(_status(), _reading(), _diagnosis())
    assert "\n" not in line and "\x1b" not in line
    assert line.startswith("t=214s phase=long-template expected=decode_memory_bandwidth engines=8 ")
    assert "primary=decode_memory_bandwidth:6,kv_cache_capacity:1,none:1" in line
    assert "top=vllm-codellama-13b-4:decode_memory_bandwidth:0.90" in line
    assert "pages=3 pending=4" in line


def test_a_missing_value_reads_as_a_dash_without_its_unit():
    assert number(None, ".2f", "s") == MISSING and number(float("nan"), ".1f", "ms", 1000) == MISSING
    assert number(0.0412, ".1f", "ms", 1000) == "41.2ms"
    row = frame_text(render_frame(_status(), _reading(), _diagnosis(), 80, 24)).split("\n")
    engine_row = next(line for line in row if line.startswith(ENGINES[0] + " "))
    assert " – " in engine_row and "-s" not in engine_row and "–ms" not in engine_row  # no ITL in _reading


def test_cells_helpers():
    assert crop("abcdef", 4) == "abc…" and crop("abc", 4) == "abc"
    assert span([0.5, 0.7, 0.6], ".1f") == "0.5–0.7" and span([0.5, 0.5], ".1f") == "0.5" and span([], ".1f") == "–"
    assert engine_set(ENGINES, 8) == "all 8 engines"
    assert engine_set([ENGINES[10 % 8], ENGINES[0]], 8) == "vllm-codellama-13b-{0,2}"


def test_rdma_row_says_why_it_reads_zero_even_when_a_rate_is_not_known_yet():
    reading = _reading()
    reading.ports["mlx5_0/1"] = {"tx": float("nan"), "rx": 0.0}
    text = frame_text(render_frame(_status(), reading, _diagnosis(), 80, 24))
    assert "RDMA  8 ports: tx 0.00, rx 0.00 (no cross-node traffic in this scenario)" in text
    reading.ports["mlx5_0/1"] = {"tx": 0.31, "rx": 0.02}
    text = frame_text(render_frame(_status(), reading, _diagnosis(), 80, 24))
    assert "RDMA  8 ports: tx 0.00–0.31, rx 0.00–0.02\n" in text  # traffic: no excuse given


def test_rdma_rows_say_why_they_read_zero():
    seed = load_scenario("prompt-growth")
    assert rdma_idle_reason(seed, seed.phases[0]) == "no cross-node traffic in this scenario"
    congested = load_scenario("cross-node-congestion")
    assert rdma_idle_reason(congested, congested.phases[0]) == "no cross-node traffic in this phase"


def test_after_the_screen_dropped_requests_are_counted_and_other_errors_shown():
    reset = (
        "----------------------------------------\n"
        "Exception occurred during processing of request from ('127.0.0.1', 58626)\n"
        "Traceback (most recent call last):\n"
        "ConnectionResetError: [Errno 104] Connection reset by peer\n"
        "----------------------------------------\n"
    )
    summary = summarize_stderr(reset * 3 + "ts=1 level=WARNING msg='prometheus did not start'\n")
    assert summary.startswith("while the screen was drawn, 3 requests to the simulator were dropped")
    assert "1 lines went to stderr" in summary and "prometheus did not start" in summary
    assert "Traceback" not in summary
    assert summarize_stderr("") == ""


def test_an_engine_whose_scrape_failed_keeps_its_row_marked_down():
    reading = _reading()
    reading.engines[ENGINES[6]] = {"up": 0.0}
    diagnosis = _diagnosis()
    diagnosis["engines"] = [e for e in diagnosis["engines"] if e["engine"] != ENGINES[6]]
    screen = frame_text(render_frame(_status(), reading, diagnosis, 80, 24)).split("\n")
    assert len(screen) <= 24 and max(cell_len(line) for line in screen) <= 80
    row = next(line for line in screen if line.startswith(ENGINES[6] + " "))
    assert "down: last scrape failed" in row
    assert "vllm-codellama-13b-6 down: scrape failed, see llm_exporter_source_errors_total" in screen
    reading.engines[ENGINES[7]] = {"up": 0.0}  # two down: the line drops its pointer rather than crop it
    screen = frame_text(render_frame(_status(), reading, diagnosis, 80, 24)).split("\n")
    assert "vllm-codellama-13b-{6,7} down: scrape failed" in screen
    assert not any(line.startswith("no bottleneck") for line in screen)  # a down engine is not "no bottleneck"


def test_companions_not_answering_read_as_nothing_pending_and_pages_unknown():
    from tests.support import free_port

    nobody = f"http://127.0.0.1:{free_port()}"
    assert _pending_alerts(nobody) == ()
    assert _firing_pages(nobody) is None  # the frame then says "Alertmanager not answering"
    assert "pages  Alertmanager not answering" in "\n".join(_screen(80, 24, pages=None))


@pytest.mark.parametrize(("state", "word"), [("loading", "(loading)"), ("warming_up", "(warming up)")])
def test_an_engine_starting_shows_its_state_not_a_dash_or_no_bottleneck(state, word):
    diagnosis = _diagnosis()
    starting = diagnosis["engines"][7]
    starting.update(primary=None, scores={}, active=[], evidence=[], actions=[], state=state)
    screen = _screen(80, 24, diagnosis)
    row = next(line for line in screen if line.startswith(starting["engine"] + " "))
    assert row.rstrip().endswith(word), row
    assert "vllm-codellama-13b-7" not in next(line for line in screen if "decode_memory_bandwidth on" in line)
    tall = "\n".join(_screen(80, 40, diagnosis))  # room for every group: its own line, below the stages
    assert f"{starting['engine']} {word[1:-1]}" in tall and "no bottleneck on vllm-codellama-13b-6" in tall
    assert tall.index("no bottleneck on") < tall.index(f"{starting['engine']} {word[1:-1]}")
