"""What a finding kind is: one record (its check, its topic, its alert), registered by its module
(exporter/health/kinds/<kind>.py) as a stage is, so the evaluation, the rules and the docs iterate
one list and no second list of names exists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from exporter.health.finding import Finding
from exporter.health.view import NodeView
from exporter.settings import HealthSettings


@dataclass(frozen=True)
class FindingAlert:
    """The page for one or more kinds: it fires on `llm_health_finding{kind=~…}` while the exporter
    holds the finding. Findings page on their own, below the stages they explain (a degraded link
    is a warning; the stage that it slows pages as the stage does)."""

    name: str
    severity: Literal["critical", "warning", "info"]
    for_: str
    summary: str
    #: the description's template: `{{ $labels.device }}`, `{{ $labels.source }}`, `{{ $value }}`
    description: str

    @property
    def runbook(self) -> str:
        return f"docs/runbooks/{self.name}.md"


Check = Callable[[NodeView, HealthSettings], list[Finding]]


@dataclass(frozen=True)
class FindingKind:
    id: str
    topic: str
    title: str
    check: Check
    alert: FindingAlert
    #: for docs/health.md: the line it is judged by and who published it
    threshold: str
    #: the counter families its check takes increases of, and the longest window it reads each
    #: over: only these are kept in the history (exporter/health/history.py), that long
    reads: tuple[tuple[str, float], ...] = ()


_KINDS: dict[str, FindingKind] = {}


def register(kind: FindingKind) -> FindingKind:
    if kind.id in _KINDS:
        raise ValueError(f"finding kind {kind.id!r} is registered twice")
    _KINDS[kind.id] = kind
    return kind


def kinds() -> tuple[FindingKind, ...]:
    """Every kind, in registration order (module name order)."""
    return tuple(_KINDS.values())


def counter_horizons() -> dict[str, float]:
    """Per counter family a kind reads, the longest window any kind reads it over."""
    horizons: dict[str, float] = {}
    for kind in _KINDS.values():
        for family, seconds in kind.reads:
            horizons[family] = max(seconds, horizons.get(family, 0.0))
    return horizons


def alerts() -> tuple[FindingAlert, ...]:
    """Each alert once, with the kinds it covers in `kinds_of`."""
    seen: dict[str, FindingAlert] = {}
    for kind in _KINDS.values():
        seen.setdefault(kind.alert.name, kind.alert)
    return tuple(seen.values())


def kinds_of(alert: FindingAlert) -> tuple[str, ...]:
    return tuple(kind.id for kind in _KINDS.values() if kind.alert.name == alert.name)
