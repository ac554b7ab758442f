"""Causes: what changed between the windows that explains the change of the primary stage.

A change of the request mix (mean prompt or output length, request rate, prefix sharing) is a
cause when the Mann-Whitney test says the windows differ, the change is large, it goes the way
that asks more of the engines (the figure's `load`: a longer prompt, more requests, less
sharing; fewer completions are an effect of a slower service, not a cause), and the figure
drives the stage the incident moved to (the stage record's `driven_by`). A large, significant
change that fails the last two is listed as another change, saying why it does not explain the
incident. An engine configuration change is named where the engine exports its configuration
as an info metric (vLLM's `vllm:cache_config_info`), by the labels that differ between the
windows: one between the baseline and the incident explains it, one between the incident and
the after window is what the fix changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from exporter.report.matrix import Row
from exporter.report.render_text import fmt_value
from exporter.stages import get

#: A mix figure counts as changed when it moved by at least this factor either way ...
MIX_RATIO = 1.5
#: ... or, for a ratio (the prefix-cache hit ratio), by this much.
SHARING_CHANGE = 0.2
#: Engine configuration exported as an info metric (its labels carry the settings).
ENGINE_CONFIG_INFO = ("vllm:cache_config_info",)
# Labels that say which engine an info series is, not how it is configured (vLLM's own `engine`
# label is its engine-core index, "0" on every server, so the scrape target comes first).
_IDENTITY = ("instance", "pod", "namespace", "container", "engine", "model_name")


def _drives(figure: str, stage_id: str) -> bool:
    """Whether a change of this mix figure drives the stage (its record's `driven_by`: the
    framework's causal arrows)."""
    stage = get(stage_id)
    return stage is not None and figure in stage.driven_by


@dataclass(frozen=True)
class Cause:
    kind: str  # "request_mix" or "engine_config"
    figure: str  # figure key, or the info metric's name
    summary: str
    baseline: float | str | None
    incident: float | str | None
    ratio: float | None
    #: a change that drives the incident's primary stage, the way that loads the engines
    explains: bool
    #: the window it shows in, against the one before it ("incident": since the baseline;
    #: "after": since the incident, what the fix changed)
    window: str = "incident"
    #: the Mann-Whitney p-value of the change (request-mix changes)
    p_value: float | None = None
    #: why a change listed does not explain the incident
    note: str = ""


def _moved(row: Row, base: float, incident: float) -> float | None:
    """The change's ratio when it is large (None otherwise); for a ratio unit, by SHARING_CHANGE."""
    if row.figure.unit == "ratio":
        return (incident / base if base > 0 else math.inf) if abs(incident - base) >= SHARING_CHANGE else None
    if base <= 0 or incident <= 0:
        return None
    ratio = incident / base
    return ratio if ratio >= MIX_RATIO or ratio <= 1 / MIX_RATIO else None


def mix_causes(rows: Mapping[str, Row], incident_stage: str) -> list[Cause]:
    """Significant, large changes of the request mix, those that explain the incident first."""
    causes = []
    for key, row in rows.items():
        load = row.figure.load
        base, incident = row.value("baseline"), row.value("incident")
        if not load or base is None or incident is None or not row.incident.significant:
            continue
        ratio = _moved(row, base, incident)
        if ratio is None:
            continue
        loads = (incident > base) == (load == "up")
        drives = _drives(key, incident_stage)
        if not loads:
            # The request rate is of completions, which fall whenever serving slows.
            completions = row.figure.unit == "req/s"
            note = "fewer completions: an effect of a slower service" if completions else "less load, not more"
            note += ", not a cause"
        elif not drives:
            note = f"does not drive {incident_stage}" if incident_stage != "none" else "no stage became primary"
        else:
            note = ""
        unit = row.figure.unit
        span = f"{fmt_value(base, unit)} → {fmt_value(incident, unit)}"
        summary = f"{row.figure.label} {span}" if unit == "ratio" else f"{row.figure.label} ×{ratio:.1f} ({span})"
        causes.append(
            Cause(
                "request_mix",
                key,
                summary,
                base,
                incident,
                ratio if math.isfinite(ratio) else None,
                loads and drives,
                p_value=row.incident.p_value,
                note=note,
            )
        )
    # The largest change first: the one most likely to be the root cause.
    return sorted(causes, key=lambda c: (not c.explains, -abs(math.log(c.ratio)) if c.ratio else 0.0))


def config_causes(
    name: str, before: list[dict[str, str]], after: list[dict[str, str]], window: str = "incident"
) -> list[Cause]:
    """Labels of one info metric that differ between two windows, per engine (its scrape target
    identifies it); a setting present in one window only is said as such."""

    def by_engine(items: list[dict[str, str]]) -> dict[str, dict[str, str]]:
        out = {}
        for labels in items:
            ident = next((labels[k] for k in _IDENTITY if labels.get(k)), "")
            out[ident] = {k: v for k, v in labels.items() if k not in _IDENTITY and k not in ("__name__", "job")}
        return out

    old, new = by_engine(before), by_engine(after)
    changes: dict[tuple[str, str, str], list[str]] = {}
    for ident in sorted(set(old) & set(new)):
        for key in sorted(set(old[ident]) | set(new[ident])):
            a, b = old[ident].get(key, "absent"), new[ident].get(key, "absent")
            if a != b:
                changes.setdefault((key, a, b), []).append(ident)
    return [
        Cause(
            "engine_config",
            name,
            f"{name} {key}: {a} → {b} ({len(idents)} engine{'s' if len(idents) != 1 else ''}, {window} window)",
            a,
            b,
            None,
            window == "incident",
            window,
            note="" if window == "incident" else "changed by the fix",
        )
        for (key, a, b), idents in changes.items()
    ]
