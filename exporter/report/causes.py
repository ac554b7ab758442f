"""Causes: what changed between the windows that explains the change of the primary stage.

A change in the request mix (mean prompt or output length, request rate, prefix sharing) is named
when it is large and when it bears on the stage the incident moved to; an engine configuration
change is named where the engine exports its configuration as an info metric (vLLM's
`vllm:cache_config_info`), by the labels that differ between the windows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exporter.report.matrix import Row
from exporter.report.render_text import fmt_value
from exporter.stages import get

#: A mix figure explains a stage change when it moved by at least this factor either way.
MIX_RATIO = 1.5
#: Engine configuration exported as an info metric (its labels carry the settings).
ENGINE_CONFIG_INFO = ("vllm:cache_config_info",)
# Labels that say which engine an info series is, not how it is configured (vLLM's own `engine`
# label is its engine-core index, "0" on every server, so the scrape target comes first).
_IDENTITY = ("instance", "pod", "namespace", "container", "engine", "model_name")
#: Prefix-cache hit ratio: an absolute change of this much is a change of sharing.
SHARING_CHANGE = 0.2


def _bears_on(figure: str, stage_id: str) -> bool:
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
    explains: bool  # bears on the incident's primary stage


def mix_causes(rows: Mapping[str, Row], incident_stage: str) -> list[Cause]:
    causes = []
    for key in ("mean_prompt_tokens", "mean_output_tokens", "request_rate"):
        row = rows.get(key)
        if row is None:
            continue
        base, incident = row.value("baseline"), row.value("incident")
        if base is None or incident is None or base <= 0 or incident <= 0:
            continue
        ratio = incident / base
        # Completions fall whenever serving slows: a lower request rate is an effect, more offered
        # load (a higher one) a cause.
        shrunk = ratio <= 1 / MIX_RATIO and key != "request_rate"
        if ratio >= MIX_RATIO or shrunk:
            unit = row.figure.unit
            summary = f"{row.figure.label} ×{ratio:.1f} ({fmt_value(base, unit)} → {fmt_value(incident, unit)})"
            causes.append(Cause("request_mix", key, summary, base, incident, ratio, _bears_on(key, incident_stage)))
    row = rows.get("prefix_cache_hit_ratio")
    if row is not None:
        base, incident = row.value("baseline"), row.value("incident")
        if base is not None and incident is not None and abs(incident - base) >= SHARING_CHANGE:
            summary = f"prefix sharing changed: hit ratio {base:.0%} → {incident:.0%}"
            explains = _bears_on("prefix_cache_hit_ratio", incident_stage)
            causes.append(Cause("request_mix", "prefix_cache_hit_ratio", summary, base, incident, None, explains))
    # The largest change first: the one most likely to be the root cause.
    return sorted(causes, key=lambda c: (not c.explains, -abs(_log(c.ratio))))


def _log(ratio: float | None) -> float:
    import math

    return math.log(ratio) if ratio else 0.0


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
            True,
        )
        for (key, a, b), idents in changes.items()
    ]
