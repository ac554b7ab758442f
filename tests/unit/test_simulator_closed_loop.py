"""A closed population of clients (`arrival: closed`): each waits for its answer, thinks, asks again.

What must hold: no client has two requests in flight, so the node never holds more requests than
the population; throughput follows the response-time law X = N / (R + Z); a phase that changes
`clients` grows or shrinks the population; the scenario keys are validated like every other.
"""

from __future__ import annotations

import random

import pytest

from exporter.simulate import parse_scenario, run_offline
from exporter.simulate.closedloop import ClosedPopulation
from exporter.simulate.workload import LengthSpec, WorkloadSpec
from exporter.validation import ConfigError

SCENARIO = """
name: closed-population
seed: 5
duration_seconds: 240
warmup_seconds: 0
node: {gpu: h100-sxm, gpus: 2}
replicas:
  - model: llama-3.1-8b
    count: 2
workload:
  arrival: closed
  clients: 40
  think_seconds: 2
  prompt_tokens: {mean: 400, cv: 0.3}
  output_tokens: {mean: 120, cv: 0.3}
phases:
  - name: few
    start_seconds: 0
  - name: many
    start_seconds: 120
    workload: {clients: 120}
"""


def spec(clients: int, think: float = 1.0) -> WorkloadSpec:
    return WorkloadSpec(
        rate_per_second=0.0,
        prompt_tokens=LengthSpec(100),
        output_tokens=LengthSpec(10),
        arrival="closed",
        clients=clients,
        think_seconds=think,
    )


def test_a_client_asks_again_only_after_its_answer_and_a_think_time() -> None:
    population = ClosedPopulation(lambda t: spec(3), (), random.Random(1))
    first = population.until(60.0)
    assert len(first) == 3  # one request each, however long the window
    assert population.until(120.0) == []
    population.left(first[0], at=130.0)
    assert population.until(130.0) == []
    again = population.until(200.0)
    assert len(again) == 1 and again[0].arrival >= 130.0
    assert population.in_flight == 3


def test_a_shrinking_population_retires_thinking_clients_first() -> None:
    population = ClosedPopulation(lambda t: spec(4 if t < 10 else 2), (10.0,), random.Random(2))
    sent = population.until(5.0)
    assert len(sent) == 4
    for request in sent[:3]:
        population.left(request, at=5.0)  # three clients think (their next request not yet sent)
    assert population.until(5.0) == []
    later = population.until(10.0)  # the change applies first, then the clients left ask
    assert population.population == 2
    # One thinking client stays; the one still waiting for its answer stays too, and asks only after it.
    later += population.until(1000.0)
    still_waiting = sent[3]
    assert all(r.id != still_waiting.id for r in later)
    assert len(later) == 1
    population.left(still_waiting, at=1000.0)
    assert len(population.until(5000.0)) == 1


@pytest.fixture(scope="module")
def run():
    return run_offline(parse_scenario(SCENARIO, "closed.yaml"))


def test_the_node_never_holds_more_requests_than_the_population(run) -> None:
    for sample in run.samples:
        held = sum(r.running + r.waiting for r in sample.replicas)
        assert held <= (40 if sample.t < 120 else 120)


def test_throughput_follows_the_response_time_law(run) -> None:
    for name, clients in (("few", 40), ("many", 120)):
        window = run.phase_window(name, tail_seconds=60)
        law = clients / (window.e2e_mean + 2.0)
        assert window.requests_per_second == pytest.approx(law, rel=0.15)
    few, many = run.phase_window("few", tail_seconds=60), run.phase_window("many", tail_seconds=60)
    assert many.requests_per_second > 2 * few.requests_per_second


@pytest.mark.parametrize(
    ("edit", "where", "problem"),
    [
        (("  clients: 40\n", "  clients: 40\n  rate_per_second: 5\n"), "workload.rate_per_second", "not used"),
        (("  clients: 40\n", ""), "workload.clients", "missing"),
        (("  clients: 40\n", "  clients: -1\n"), "workload.clients", "at least 0"),
        (("  think_seconds: 2\n", "  think_seconds: soon\n"), "workload.think_seconds", "number"),
        (
            ("  arrival: closed\n  clients: 40\n  think_seconds: 2\n", "  rate_per_second: 5\n  clients: 40\n"),
            "workload.clients",
            "only with arrival closed",
        ),
        (
            ("workload: {clients: 120}", "workload: {arrival: poisson, rate_per_second: 5}"),
            "phases[1].workload.arrival",
            "cannot follow each other",
        ),
    ],
)
def test_closed_population_keys_are_validated(edit, where, problem) -> None:
    assert edit[0] in SCENARIO
    with pytest.raises(ConfigError) as error:
        parse_scenario(SCENARIO.replace(*edit), "edited.yaml")
    assert error.value.where == where
    assert problem in str(error.value)
