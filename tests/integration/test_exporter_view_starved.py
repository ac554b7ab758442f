"""An offline view reads what the node says, however slowly a starved host answers
(exporter/simulate/exporter_view.py): the node's clock stands still while a round runs, so a page
that comes back after the live timeouts is read, and so is the round after it."""

from __future__ import annotations

import time

import pytest

from exporter.simulate import load_scenario
from exporter.simulate.exporter_view import ExporterView
from exporter.simulate.node import SimulatedNode

pytestmark = pytest.mark.integration

#: past both live timeouts: an engine's scrape (2 s) and a GPU exporter's (5 s)
LATE_SECONDS = 5.5
SLOW_PAGES = {"/engine/0/metrics", "/gpu/metrics"}


def test_pages_slower_than_the_live_timeouts_are_read_in_their_round_and_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node = SimulatedNode(load_scenario("prompt-growth"))
    view = ExporterView(node)
    respond = view.server.respond
    slow = {"on": False}

    def late(path: str) -> tuple[int, str, bytes]:
        if slow["on"] and path in SLOW_PAGES:
            time.sleep(LATE_SECONDS)
        return respond(path)

    monkeypatch.setattr(view.server, "respond", late)
    rounds = []
    try:
        for index, (_, snapshot) in enumerate(view.run(20.0, 5.0)):
            slow["on"] = index == 1  # the third round is slow; the rounds either side of it are not
            rounds.append(snapshot)
    finally:
        view.close()
    assert len(rounds) == 4
    for snapshot in rounds:
        down = [(s.source, s.target, s.error, s.message) for s in snapshot.statuses if not s.up]
        assert not down, down
        engine_up = [m.value for m in snapshot.metrics if m.name == "llm_engine_up"]
        assert engine_up == [1.0] * len(node.replicas), engine_up
