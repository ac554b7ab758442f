"""What /diagnosis says of each engine beside its verdict: its state, and why it has no verdict.

Every engine the exporter scrapes (configured or discovered) exports `llm_engine_up`, 1 or 0, so
each is listed, a failing one too, with the reason its source gave (`llm_exporter_source_up` and
`llm_exporter_source_errors_total{reason}` know it; the message is the one the exporter logs).
The state is an enumeration with a reason so that the states an engine reports of itself slot in
beside `down` as their sources learn them (vLLM's start-up metrics): only an engine that is up and
has a level window of history gets a verdict; any other says why not. An engine that answers but
reports itself asleep (`llm_engine_asleep 1`, from vLLM's `engine_sleep_state`) is `asleep`, its
sleep state the reason: it serves no request, so neither its idle GPUs nor its empty queue say
anything of a bottleneck, and it is not down either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from exporter.model import Metric, Sample
from exporter.stages.inputs import EngineKey, engine_key


class EngineState(StrEnum):
    UP = "up"
    #: its last scrape failed (`llm_engine_up 0`): the source's reason and message say why
    DOWN = "down"
    #: sleeping (vLLM's sleep mode: weights offloaded or discarded), so it serves nothing
    ASLEEP = "asleep"
    #: loading its model: the server answers, the engine does not serve yet
    LOADING = "loading"
    #: serving its first requests while it compiles and captures graphs: its latencies are not its own yet
    WARMING_UP = "warming_up"


#: why an engine in each state other than up has no verdict
NO_VERDICT: Mapping[EngineState, str] = {
    EngineState.DOWN: "the engine is down",
    EngineState.ASLEEP: "the engine is asleep: it serves nothing to judge",
    EngineState.LOADING: "the engine is loading its model",
    EngineState.WARMING_UP: "the engine is warming up: its latencies are not yet its own",
}


@dataclass(frozen=True)
class Status:
    """One engine's state now, with the reason and message its source gave, and since when
    (wall clock) the exporter has seen it in that state."""

    state: EngineState
    since: float
    reason: str = ""
    message: str = ""

    def why_no_verdict(self) -> str:
        why = NO_VERDICT[self.state]
        if self.reason:
            why += f" ({self.reason}: {self.message})" if self.message else f" ({self.reason})"
        return why

    def as_json(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "state_reason": self.reason,
            "state_message": self.message,
            "state_since": datetime.fromtimestamp(self.since, UTC).isoformat(),
        }


class States:
    """Each listed engine's Status, carried from round to round so `since` means something."""

    def __init__(self) -> None:
        self.current: dict[EngineKey, Status] = {}

    def update(self, metrics: Iterable[Metric], failures: Mapping[str, tuple[str, str]], wall: float) -> None:
        """`failures`: per `engine` label, (reason, message) of its source's failed collection."""
        up: dict[EngineKey, float] = {}
        sleeping: dict[EngineKey, str] = {}
        for metric in metrics:
            if not isinstance(metric, Sample):
                continue
            if metric.name == "llm_engine_up":
                up[engine_key(metric.labels)] = metric.value
            elif metric.name == "llm_engine_asleep" and metric.value == 1.0:
                sleeping[engine_key(metric.labels)] = metric.labels.get("sleep_state", "")
        seen: dict[EngineKey, Status] = {}
        for key, value in up.items():
            if value == 1.0 and key in sleeping:
                state, reason, message = EngineState.ASLEEP, sleeping[key], ""
            elif value == 1.0:
                state, reason, message = EngineState.UP, "", ""
            else:
                reason, message = failures.get(key[0], ("", ""))
                state = EngineState.DOWN
            before = self.current.get(key)
            since = before.since if before is not None and before.state is state else wall
            seen[key] = Status(state, since, reason, message)
        self.current = seen

    def asleep(self) -> set[EngineKey]:
        return {key for key, status in self.current.items() if status.state is EngineState.ASLEEP}

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for status in self.current.values():
            counts[status.state.value] = counts.get(status.state.value, 0) + 1
        return counts
