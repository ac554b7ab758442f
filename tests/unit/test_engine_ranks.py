"""Every rank of an engine seen, and one that stops reporting named as such (exporter/sources/
engine_ranks.py), on a vLLM with two data-parallel engines behind one port (the layout of vLLM
PR #22227's DP=2 dump, as tests/unit/test_engine_mappings.py's VLLM_DP2)."""

from __future__ import annotations

from exporter.model import EngineReading
from exporter.sources.engine_ranks import FORGET_SECONDS, RankTracker
from tests.unit.test_engine_mappings import VLLM_DP2, only_reading


def without_rank_one(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if 'engine="1"' not in line)


def test_a_data_parallel_rank_that_vanishes_is_named_until_it_returns_or_is_forgotten() -> None:
    tracker = RankTracker()
    both, one = only_reading(VLLM_DP2, "vllm"), only_reading(without_rank_one(VLLM_DP2), "vllm")
    assert one.requests_running == 3.0  # only engine 0's queue is left to read
    tracker.update(0.0, [both])
    assert [(rank, up) for rank, up, _ in tracker.states(0.0, both.model)] == [("engine=0", True), ("engine=1", True)]
    tracker.update(5.0, [one])
    states = {rank: (up, silent) for rank, up, silent in tracker.states(5.0, one.model)}
    assert states == {"engine=0": (True, 0.0), "engine=1": (False, 5.0)}
    tracker.update(10.0, [both])  # back
    assert all(up for _, up, _ in tracker.states(10.0, both.model))
    tracker.update(10.0 + FORGET_SECONDS + 1, [one])  # gone for good: a scale-down, not a failure
    assert [rank for rank, _, _ in tracker.states(10.0 + FORGET_SECONDS + 1, one.model)] == []


def test_an_engine_of_one_rank_has_no_per_rank_series() -> None:
    tracker = RankTracker()
    tracker.update(0.0, [EngineReading(model="m", ranks=("engine=0",))])
    assert list(tracker.states(0.0, "m")) == []
