"""What /diagnosis says beside a verdict (issue #42): every engine with its state, why one has no
verdict, a verdict that leaves with its evidence, and advice that is not news to the engine."""

from __future__ import annotations

from exporter.diagnosis import Diagnoser, Thresholds
from exporter.model import Histogram, Metric, QuantileSummary, Sample
from exporter.stages import get
from tests.unit.test_diagnosis import ENGINE, engine_metrics, gpu_metrics, run

KEY = ("e0", "vllm", "m")
ITL = "llm_engine_inter_token_latency_seconds"
# vLLM V1's inter-token-latency bucket bounds up to 0.1 s, then +Inf
BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, float("inf"))
TOKENS_PER_ROUND = 2000
INTERVAL = 5.0
EXPORTER_WINDOW_ROUNDS = 12  # the exporter's quantile window: a minute of 5 s rounds


def down(engine: str) -> Sample:
    return Sample("llm_engine_up", {"engine": engine, "engine_type": "unknown", "model": ""}, 0.0)


# ---- every engine listed with its state --------------------------------------------------------


def test_engines_that_are_down_are_listed_with_their_sources_reason() -> None:
    """Both configured engines down: the page lists both, says why, and gives no verdict."""
    diagnoser = Diagnoser()
    failures = {
        "a": ("connection", "http://127.0.0.1:9/metrics: connection refused"),
        "b": ("timeout", "still running after 2s"),
    }
    diagnoser.update([down("a"), down("b")], 0.0, failures=failures)
    report = diagnoser.report()
    engines = {e["engine"]: e for e in report["engines"]}
    assert set(engines) == {"a", "b"}
    a = engines["a"]
    assert a["state"] == "down" and a["state_reason"] == "connection"
    assert a["state_message"] == "http://127.0.0.1:9/metrics: connection refused"
    assert a["primary"] is None and a["scores"] == {} and a["actions"] == []
    assert a["no_verdict"] == "the engine is down (connection: http://127.0.0.1:9/metrics: connection refused)"
    assert engines["b"]["no_verdict"] == "the engine is down (timeout: still running after 2s)"
    assert report["node"]["states"] == {"down": 2} and report["node"]["engines"] == 2
    assert report["node"]["primary_counts"] == {}, "an engine without a verdict counts under no stage"


def test_an_engine_is_judged_once_its_history_spans_a_level_window() -> None:
    diagnoser = Diagnoser()
    for i in range(3):
        gauges = diagnoser.update(engine_metrics(waiting=20, kv=0.97), i * INTERVAL)
    (entry,) = diagnoser.report()["engines"]
    assert entry["state"] == "up" and entry["primary"] is None
    assert entry["no_verdict"] == "not enough history yet: 10s of the 30s level window"
    assert not [m for m in gauges if m.name.startswith("llm_bottleneck_")], "no gauges before a verdict"
    d, _ = run(diagnoser, 4, lambda i: engine_metrics(waiting=20, kv=0.97), start=3)
    (entry,) = diagnoser.report()["engines"]
    assert entry["primary"] == d.primary == "kv_cache_capacity" and entry["no_verdict"] is None


def test_a_down_engine_within_its_grace_shows_its_last_verdict_and_says_so() -> None:
    diagnoser = Diagnoser()
    run(diagnoser, 8, lambda i: engine_metrics(waiting=20, kv=0.97))
    up_since = diagnoser.report()["engines"][0]["state_since"]
    labels = {**ENGINE}
    diagnoser.update([Sample("llm_engine_up", labels, 0.0)], 45.0, failures={"e0": ("http_status", "HTTP 503")})
    (entry,) = diagnoser.report()["engines"]
    assert entry["state"] == "down" and entry["primary"] == "kv_cache_capacity"
    assert entry["state_since"] >= up_since
    assert entry["no_verdict"] == (
        "the engine is down (http_status: HTTP 503): the verdict shown is its last, 10s old, "
        "kept while it is down for up to 60s"
    )


def test_an_engine_that_falls_asleep_is_listed_asleep_keeps_no_verdict_and_is_judged_again_on_waking() -> None:
    """vLLM's sleep mode (`llm_engine_asleep 1`): up, but serving nothing, so neither judged nor
    down; unlike a down engine it keeps no last verdict, and its history waits for it to wake."""
    diagnoser = Diagnoser()
    run(diagnoser, 8, lambda i: engine_metrics(waiting=20, kv=0.97))
    asleep = Sample("llm_engine_asleep", {**ENGINE, "sleep_state": "discard_all"}, 1.0)
    gauges = diagnoser.update([*engine_metrics(running=0, kv=0.0), asleep], 40.0)
    report = diagnoser.report()
    (entry,) = report["engines"]
    assert (entry["state"], entry["state_reason"], entry["primary"]) == ("asleep", "discard_all", None)
    assert entry["no_verdict"] == "the engine is asleep: it serves nothing to judge (discard_all)"
    assert not [m for m in gauges if m.name.startswith("llm_bottleneck_")]
    assert report["node"]["states"] == {"asleep": 1}
    awake = Sample("llm_engine_asleep", {**ENGINE, "sleep_state": "awake"}, 0.0)
    diagnoser.update([*engine_metrics(waiting=20, kv=0.97), awake], 45.0)
    (entry,) = diagnoser.report()["engines"]
    assert entry["state"] == "up" and entry["primary"] == "kv_cache_capacity" and entry["no_verdict"] is None


# ---- a verdict leaves with its evidence --------------------------------------------------------


def itl_round(cumulative: list[float], recent: list[float], seconds: float) -> QuantileSummary:
    """One round of `TOKENS_PER_ROUND` tokens at `seconds` each: the engine's cumulative histogram,
    and the exporter's quantiles over its window (the last EXPORTER_WINDOW_ROUNDS rounds' tokens)."""
    bucket = next(i for i, bound in enumerate(BOUNDS) if seconds <= bound)
    for i in range(bucket, len(BOUNDS)):
        cumulative[i] += TOKENS_PER_ROUND
    recent.append(seconds)
    window = sorted(recent[-EXPORTER_WINDOW_ROUNDS:])
    p95 = window[int(0.95 * (len(window) - 1) + 0.5)]
    histogram = Histogram(BOUNDS, tuple(cumulative), 0.0, cumulative[-1])
    return QuantileSummary(ITL, ENGINE, ((0.5, window[len(window) // 2]), (0.95, p95)), cumulative[-1], 0.0, histogram)


def test_decode_bandwidth_leaves_within_a_level_window_of_the_tokens_recovering() -> None:
    """The seed case's remedies: tokens slow (45 ms against 20 ms) on saturated HBM, then fast
    again. The exporter's windowed p95 keeps the slow tokens for its whole minute; the verdict
    must not: it reads its level window's own quantile from the engine's histogram."""
    t = Thresholds()
    cumulative = [0.0] * len(BOUNDS)
    recent: list[float] = []
    slow_from, fast_from = 30, 60

    def make(i: int) -> list[Metric]:
        seconds = 0.045 if slow_from <= i < fast_from else 0.02
        metrics = [m for m in engine_metrics(running=24, itl_p95=None) if m.name != ITL]
        return [*metrics, itl_round(cumulative, recent, seconds), *gpu_metrics(0.48, 0.95, 0.15)]

    diagnoser = Diagnoser(t)
    primaries = []
    for i in range(fast_from + 30):
        diagnoser.update(make(i), i * INTERVAL)
        primaries.append(diagnoser.latest[KEY].primary if KEY in diagnoser.latest else None)
    incident = primaries[slow_from + 8 : fast_from]
    assert incident and set(incident) == {"decode_memory_bandwidth"}, primaries
    cleared = next(i for i in range(fast_from, len(primaries)) if primaries[i] == "none")
    assert (cleared - fast_from) * INTERVAL <= t.level_seconds, primaries[fast_from:]
    assert all(p == "none" for p in primaries[cleared:]), "once clear it stays clear"


def test_a_stage_the_band_keeps_active_says_so_in_its_evidence() -> None:
    diagnoser = Diagnoser(Thresholds(level_seconds=5))
    run(diagnoser, 5, lambda i: engine_metrics(waiting=10, kv=0.96))
    d, _ = run(diagnoser, 3, lambda i: engine_metrics(waiting=10, kv=0.88), start=5)
    assert d.active["kv_cache_capacity"] and d.scores["kv_cache_capacity"] < 0.6
    held = [line for line in d.evidence if "held by hysteresis" in line]
    # the first round at 0.88 still has 0.96 within its 5 s window: held from the second, 5 s ago
    assert held == [
        f"kv_cache_capacity {d.scores['kv_cache_capacity']:.2f}: held by hysteresis for 5s: the score is under "
        "enter_score 0.6, and the stage clears once it falls under exit_score 0.4"
    ]


# ---- advice that is not news -------------------------------------------------------------------


def actions(stage: str, settings: dict[str, str]) -> list[str]:
    record = get(stage)
    assert record is not None
    return record.actions_for(settings)


def test_the_seed_remedies_are_not_advised_again_once_taken() -> None:
    """After prefix caching on, max_model_len 4096 (both in vLLM's cache_config_info) and
    shortest-job-first (which no engine exports): nothing already on is advised, and what the
    exporter cannot know is advised "if not already"."""
    remedied = {"prefix_caching": "true", "max_model_len": "4096", "gpu_memory_utilization": "0.55"}
    decode = actions("decode_memory_bandwidth", remedied)
    assert not any("prefix caching" in a or "--max-model-len" in a for a in decode), decode
    (sjf,) = [a for a in decode if "shortest-job-first" in a]
    assert "if not already" in sjf
    kv = actions("kv_cache_capacity", remedied)
    assert not any("prefix caching" in a or "--max-model-len" in a for a in kv), kv


def test_advice_on_settings_the_engine_does_not_report_says_if_not_already() -> None:
    for stage in ("decode_memory_bandwidth", "kv_cache_capacity"):
        for line in actions(stage, {}):
            if any(word in line for word in ("prefix caching", "--max-model-len (e.g.", "shortest-job-first")):
                assert "if not already" in line, line


class _Watched(dict):
    """The engines' histories, noting at each pass over them the verdicts /diagnosis could read
    then (an HTTP thread reads them while a round runs)."""

    def __init__(self, histories: dict, diagnoser: Diagnoser) -> None:
        super().__init__(histories)
        self.diagnoser = diagnoser
        self.published: list[tuple[dict, set]] = []

    def __iter__(self):  # type: ignore[no-untyped-def]
        self.published.append((self.diagnoser.latest, set(self.diagnoser.latest)))
        return super().__iter__()


def test_verdicts_once_published_are_not_added_to_while_the_round_runs() -> None:
    """A key added to the published verdicts mid-round (an engine within its grace keeps its last)
    broke a /diagnosis answer iterating them: the round builds its verdicts, then publishes them."""
    diagnoser = Diagnoser()
    run(diagnoser, 8, lambda i: engine_metrics(waiting=20, kv=0.97))
    watched = diagnoser._histories = _Watched(diagnoser._histories, diagnoser)
    diagnoser.update([Sample("llm_engine_up", {**ENGINE}, 0.0)], 45.0, failures={"e0": ("timeout", "2s")})
    assert KEY in diagnoser.latest, "within its grace the engine keeps its last verdict"
    assert watched.published
    for verdicts, keys in watched.published:
        if verdicts is diagnoser.latest:
            assert keys == set(verdicts), "a published dict of verdicts changed after it was published"
