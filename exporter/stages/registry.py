"""The stages, registered by their own modules (node_exporter's collectors, one file each).

Each exporter/stages/<id>.py calls `register(STAGE)` when imported, and the package imports every
module of itself (exporter/stages/__init__.py), so no second list of stage names exists anywhere:
consumers iterate `stages()` in request-path order. A test may register a stage of its own and
unregister it afterwards.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from exporter.stages.record import Scope, Stage

In = TypeVar("In")

_STAGES: dict[str, Stage[Any]] = {}
# The ordered views, rebuilt on each registration: the diagnosis reads them every round.
_ordered: tuple[Stage[Any], ...] = ()


def register(stage: Stage[Any]) -> Stage[Any]:
    """Add a stage; its id and its place on the path must be its own."""
    global _ordered
    if stage.id in _STAGES or stage.id == "none":
        raise ValueError(f"stage {stage.id!r} is registered twice (or is the reserved 'none')")
    for other in _STAGES.values():
        if other.order == stage.order:
            raise ValueError(f"stages {other.id!r} and {stage.id!r} share order {stage.order}")
    _STAGES[stage.id] = stage
    _ordered = tuple(sorted(_STAGES.values(), key=lambda s: s.order))
    return stage


def unregister(stage_id: str) -> None:
    global _ordered
    del _STAGES[stage_id]
    _ordered = tuple(sorted(_STAGES.values(), key=lambda s: s.order))


def stages() -> tuple[Stage[Any], ...]:
    """Every stage, in request-path order."""
    return _ordered


def of(scope: Scope[In]) -> tuple[Stage[In], ...]:
    """The stages of one scope, in request-path order."""
    return tuple(cast(Stage[In], s) for s in _ordered if s.scope is scope)


def get(stage_id: str) -> Stage[Any] | None:
    return _STAGES.get(stage_id)
