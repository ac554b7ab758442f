"""Did the fix work: the after window against the baseline and the incident, per headline figure.

A figure has recovered when the after value is within RECOVERED of the baseline (or better); it
has improved, or got worse, when it moved by at least IMPROVED from the incident and the
Mann-Whitney test of the after window's values against the incident's says so; a figure whose
windows hold too few values for the test is not judged either way. The fix worked when the
incident's primary stage is no longer primary after, no headline figure is worse than in the
incident, and the latency tails recovered or improved.

An after window that opens on the incident's queue (its first waiting count many times the
baseline's) holds, until that backlog drains, requests queued during the incident: their latency
is the incident's, not the fix's. When the fix is not shown to have worked over the whole window,
the rest of it, from the moment the queue is back near the baseline's, is judged as well: the fix
worked if it worked there, and the summary says both. A request's end-to-end latency is read when
it finishes, so the last queued requests still finish, with the incident's waits in their
latency, up to one request's duration later, and a tail's value looks back over the rate window:
the end-to-end tail is judged from the drain plus the baseline's end-to-end P99 and that look-back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from exporter.report.matrix import Comparison, Row
from exporter.report.stats import WindowValue
from exporter.report.timing import MIN_VALUES

RECOVERED = 0.10
IMPROVED = 0.10
HEADLINE = ("request_rate", "generation_tokens_rate", "e2e_p99", "ttft_p99", "itl_p50", "waiting", "kv_usage_max")
TAILS = ("e2e_p99", "ttft_p99")
#: an after window opening on this many times the baseline's waiting requests (and at least
#: BACKLOG_MIN of them) opens on the incident's backlog; it has drained once back under that
BACKLOG_RATIO = 10.0
BACKLOG_MIN = 1.0
#: figures read when requests finish: they lag the drain by a request's duration (its P99 here)
READ_AT_COMPLETION = "e2e_p99"


@dataclass(frozen=True)
class FigureVerdict:
    figure: str
    label: str
    unit: str
    baseline: float | None
    incident: float | None
    after: float | None
    verdict: str  # recovered / improved / not fixed / worse / too few values / no data


@dataclass(frozen=True)
class FixVerdict:
    worked: bool
    summary: str
    figures: list[FigureVerdict]
    incident_stage: str
    after_stage: str
    #: seconds into the after window at which the incident's backlog had drained, when it opened
    #: on one and the whole window did not show the fix working; `settled` judges the rest of it
    backlog_seconds: float | None = None
    settled: FixVerdict | None = None


def _better(value: float, than: float, higher: bool) -> float:
    """How much better `value` is than `than`, relative to `than` (negative: worse)."""
    scale = abs(than) if than else 1.0
    return (value - than) / scale if higher else (than - value) / scale


def figure_verdict(row: Row) -> FigureVerdict:
    base, incident, after = row.value("baseline"), row.value("incident"), row.value("after")
    higher = row.figure.better == "higher"
    since_incident = Comparison.between(row.values["incident"], row.values["after"]) if "after" in row.values else None
    if incident is None or after is None or since_incident is None:
        verdict = "no data"
    elif base is not None and _better(after, base, higher) >= -RECOVERED:
        verdict = "recovered"
    elif not since_incident.judged:
        verdict = "too few values"
    elif since_incident.significant and _better(after, incident, higher) >= IMPROVED:
        verdict = "improved"
    elif since_incident.significant and _better(after, incident, higher) <= -IMPROVED:
        verdict = "worse"
    else:
        verdict = "not fixed"
    return FigureVerdict(row.figure.key, row.figure.label, row.figure.unit, base, incident, after, verdict)


def backlog_drained(rows: Mapping[str, Row]) -> float | None:
    """The share of the after window its opening backlog took to drain (see the module's
    docstring); None when it opened on no backlog, or one that never drained."""
    row = rows.get("waiting")
    base = row.values.get("baseline") if row is not None else None
    after = row.values.get("after") if row is not None else None
    if base is None or base.mean is None or after is None or len(after.values) < 2:
        return None
    level = max(BACKLOG_MIN, BACKLOG_RATIO * base.mean)
    if after.values[0] <= level:
        return None
    drained = next((i for i, value in enumerate(after.values) if value <= level), None)
    return None if drained is None else drained / len(after.values)


def _from(rows: Mapping[str, Row], share: float, lag: float) -> dict[str, Row]:
    """The rows with each after window's values from `share` of the way in, READ_AT_COMPLETION's
    from `share + lag` where that leaves MIN_VALUES."""
    out = {}
    for key, row in rows.items():
        after = row.values.get("after")
        if after is not None:
            count = len(after.values)
            start = round(share * count)
            if key == READ_AT_COMPLETION:
                lagged = round((share + lag) * count)
                start = lagged if count - lagged >= MIN_VALUES else start
            row = replace(row, values={**row.values, "after": WindowValue.of(after.values[start:])})
        out[key] = row
    return out


def _completion_lag(rows: Mapping[str, Row], after_seconds: float, lookback: float) -> float:
    """A request's duration (the baseline's end-to-end P99) and the tail's look-back, as a share of
    the after window."""
    row = rows.get(READ_AT_COMPLETION)
    duration = row.value("baseline") if row is not None else None
    if duration is None or duration <= 0 or after_seconds <= 0:
        return 0.0
    return (duration + lookback) / after_seconds


def fix_verdict(
    rows: Mapping[str, Row],
    incident_stage: str,
    after_stage: str,
    after_seconds: float | None = None,
    lookback: float = 0.0,
) -> FixVerdict:
    """The verdict over the after window (`after_seconds` long) or, where it opened on the
    incident's backlog and the whole window does not show the fix working, over the rest of it
    once the backlog drained (the summary then says both). `lookback`: seconds a latency tail's
    value looks back over."""
    whole = _verdict(rows, incident_stage, after_stage)
    share = backlog_drained(rows)
    if whole.worked or share is None or after_seconds is None:
        return whole
    settled = _verdict(_from(rows, share, _completion_lag(rows, after_seconds, lookback)), incident_stage, after_stage)
    drained_in = share * after_seconds
    waited = _waiting_text(rows["waiting"].values["after"].values[0])
    backlog = f"{waited} waiting when the after window opened, gone {drained_in:.0f} s in"
    if settled.worked:
        summary = (
            f"the fix worked once the incident's backlog had drained ({backlog}): "
            f"{_worked(incident_stage, after_stage, settled.figures)}. Over the whole window, whose first "
            f"{drained_in:.0f} s served requests queued during the incident, {whole.summary}"
        )
    elif settled.summary == whole.summary:  # said once
        summary = f"{whole.summary}; the same once the incident's backlog had drained ({backlog})"
    else:
        summary = f"{whole.summary}. Once the incident's backlog had drained ({backlog}): {settled.summary}"
    return replace(whole, worked=settled.worked, summary=summary, backlog_seconds=drained_in, settled=settled)


def _worked(incident_stage: str, after_stage: str, figures: list[FigureVerdict]) -> str:
    """What shows a fix worked: the stage gone, and how many headline figures recovered."""
    recovered = sum(f.verdict == "recovered" for f in figures)
    return (
        f"{incident_stage} is no longer the primary stage (after: {after_stage}); "
        f"{recovered} of {len(figures)} headline figures back to the baseline"
    )


def _waiting_text(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def _verdict(rows: Mapping[str, Row], incident_stage: str, after_stage: str) -> FixVerdict:
    figures = [figure_verdict(rows[key]) for key in HEADLINE if key in rows and rows[key].figure.better]
    by_key = {f.figure: f for f in figures}
    stage_gone = incident_stage == "none" or after_stage != incident_stage
    none_worse = all(f.verdict != "worse" for f in figures)
    tails = [by_key[k] for k in TAILS if k in by_key]
    tails_ok = bool(tails) and all(f.verdict in ("recovered", "improved") for f in tails)
    unjudged = [f.label for f in tails if f.verdict in ("too few values", "no data")]
    worked = stage_gone and none_worse and tails_ok
    if worked:
        summary = f"the fix worked: {_worked(incident_stage, after_stage, figures)}"
    elif stage_gone and none_worse and (unjudged or not tails):
        summary = (
            f"the fix could not be judged: {incident_stage} is no longer the primary stage, but "
            + (f"{' and '.join(unjudged)} have too few values or none" if unjudged else "no latency tail has data")
            + " (widen the windows, or have Prometheus scrape the engines' histograms)"
        )
    elif stage_gone and none_worse:
        # Nothing got worse and the stage is gone, but the tails' test does not say they improved:
        # that is no evidence either way, not a failure.
        summary = (
            f"the fix is not shown to have worked: {incident_stage} is no longer the primary stage, but "
            "the latency tails neither recovered nor improved significantly"
        )
    else:
        reasons = []
        if not stage_gone:
            reasons.append(f"{incident_stage} is still the primary stage")
        if not none_worse:
            reasons.append("a headline figure is worse than in the incident")
        if not tails_ok:
            reasons.append("the latency tails did not recover or improve significantly")
        summary = "the fix did not work: " + "; ".join(reasons)
    return FixVerdict(worked, summary, figures, incident_stage, after_stage)
