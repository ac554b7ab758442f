"""The demo's screen: one frame that fits the terminal (80x24 at the least) and reads top to bottom.

A frame answers, in order: where the scenario is and what it should show (phase, expected stage,
note); what each engine is doing and which stage the exporter names primary (one table row per
engine); why and what to do (per primary stage, the engines that share it, the strongest engine's
evidence and first action, as `/diagnosis` reports them); what pages; and where to look next.
Every line is cropped to the width and the evidence block gets the height that is left, so
nothing scrolls away; a taller or wider terminal gets more evidence, more actions and more columns.
`plain_line` is the same content as one log line, for pipes and files.

Both read only what the exporter publishes (its /metrics and /diagnosis documents) and what the
demo knows about its own scenario and companions (DemoStatus), never the simulator's internals.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from exporter.simulate.cells import (
    MISSING,
    Group,
    Item,
    crop,
    crop_left,
    engine_set,
    fit_groups,
    labelled_item,
    number,
    span,
)
from exporter.simulate.pd_spec import expected_text
from exporter.simulate.view import ExporterReading, natural_key

MIN_WIDTH, MIN_HEIGHT = 80, 24
DASHBOARD = "dashboards/generated/bottleneck-diagnosis.json"
NO_STAGE = ("none", MISSING)  # /diagnosis says "none"; MISSING before the first diagnosis
#: an engine's state in place of a stage where it has no verdict by design (exporter/diagnosis/states.py)
STATE_WORDS = {"loading": "(loading)", "warming_up": "(warming up)", "asleep": "(asleep)"}
#: what the demo says under the table of the engines in such a state
STATE_LINES = {
    "(loading)": "loading its model: no verdict until it serves",
    "(warming up)": "warming up: no verdict until its cold regime ends (health.warmup_seconds)",
    "(asleep)": "asleep: out of the router's pool, no verdict until it wakes",
}


@dataclass(frozen=True)
class Page:
    """One alert firing in Alertmanager."""

    alertname: str
    severity: str
    engine: str = ""


@dataclass(frozen=True)
class DemoStatus:
    """What the demo knows beside the exporter's documents: its scenario's clock and its URLs."""

    scenario: str
    simulated_seconds: float
    phase: str
    phase_number: int  # 1-based
    phase_count: int
    expected_stage: str
    secondary_stages: tuple[str, ...]
    note: str
    exporter_url: str
    simulator_url: str
    prometheus_url: str | None = None
    alertmanager_url: str | None = None
    pages: tuple[Page, ...] | None = None  # None: no Alertmanager to ask (or it did not answer)
    pending_alerts: tuple[str, ...] = ()  # names of the alerts Prometheus holds in their `for:`, one per alert
    rdma_idle_reason: str = "no cross-node traffic in this scenario"
    #: how long the exporter has watched this phase, and its window: until the window has filled,
    #: the verdicts still weigh the previous phase (or the exporter's first rounds)
    phase_seen_seconds: float = float("inf")
    window_seconds: float = 60.0
    #: a disaggregated phase's pools that should read another stage, and the engines' type
    expected_by_role: tuple[tuple[str, str], ...] = ()
    engine_type: str = "vllm"

    @property
    def expected_text(self) -> str:
        return expected_text(self.expected_stage, self.expected_by_role)

    @property
    def window_filling(self) -> bool:
        return self.phase_seen_seconds < self.window_seconds


@dataclass
class _EngineView:
    name: str
    primary: str
    scores: dict[str, float]
    evidence: list[str]
    actions: list[str]
    down: bool = False  # llm_engine_up 0: the exporter's last scrape of it failed

    @property
    def nearest_stage(self) -> str:
        return max(self.scores, key=lambda s: self.scores[s]) if self.scores else "none"

    @property
    def score(self) -> float:
        """The primary stage's score; with no primary, the highest (how close the engine came)."""
        return self.scores.get(self.nearest_stage if self.quiet else self.primary, 0.0)

    @property
    def quiet(self) -> bool:
        """No stage named: none, not diagnosed yet, or a state with no verdict (loading, ...)."""
        return self.primary in NO_STAGE or self.primary in STATE_WORDS.values()

    def evidence_for(self, stage: str) -> list[str]:
        """The evidence /diagnosis gives for `stage`, strongest first, without the "stage score: " prefix."""
        lines = []
        for line in self.evidence:
            head, _, rest = line.partition(": ")
            if head.split(" ")[0] == stage and rest:
                lines.append(rest)
        return lines


def _engines(reading: ExporterReading, diagnosis: dict[str, Any] | None) -> list[_EngineView]:
    documents = (diagnosis or {}).get("engines", [])
    by_name = {e["engine"]: e for e in documents if isinstance(e, dict) and "engine" in e}
    views = []
    for name in sorted(set(reading.engines) | set(by_name), key=natural_key):
        doc = by_name.get(name, {})
        primary = (
            doc.get("primary")
            or STATE_WORDS.get(doc.get("state", ""))
            or str(reading.engines.get(name, {}).get("primary") or MISSING)
        )
        scores, evidence, actions = dict(doc.get("scores", {})), list(doc.get("evidence", [])), doc.get("actions", [])
        down = reading.engines.get(name, {}).get("up") == 0
        views.append(_EngineView(name, primary, scores, evidence, list(actions), down))
    return views


def _gpu_mean(reading: ExporterReading, engine: str, key: str) -> float | None:
    values = [v for g in reading.gpus.values() if g.get("engine") == engine and isinstance(v := g.get(key), float)]
    return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------------------- sections
def _header(status: DemoStatus, width: int, note_lines: int) -> list[Text]:
    first = Text(f"{status.scenario} t={status.simulated_seconds:.0f}s ", style="bold")
    first.append(f"phase {status.phase_number}/{status.phase_count} {status.phase}", style="bold cyan")
    first.append(": expects ", style="cyan")
    first.append(status.expected_text, style="bold cyan")
    first.truncate(width, overflow="ellipsis")
    # Until the window has filled, the verdicts still weigh what came before the phase: said first.
    filling = (
        f"window filling {status.phase_seen_seconds:.0f}/{status.window_seconds:.0f}s, verdicts settling · "
        if status.window_filling
        else ""
    )
    secondary = f"secondary {', '.join(status.secondary_stages)} · " if status.secondary_stages else ""
    note = filling + secondary + status.note
    wrapped = textwrap.wrap(note, width - 2)
    if len(wrapped) > note_lines:
        wrapped = wrapped[: note_lines - 1] + [crop(" ".join(wrapped[note_lines - 1 :]), width - 2)]
    lines = [Text("  " + line, style="dim") for line in wrapped]
    if filling and lines:
        lines[0].stylize("yellow", 2, 2 + len(filling.rstrip(" ·")))
    return [first] + lines


def _table(engines: list[_EngineView], reading: ExporterReading, width: int) -> list[Text]:
    name_width = min(max([len(e.name) for e in engines] + [6]), 28)
    wide = width >= name_width + 36 + 24 + 19  # room for the engine's GPU ratios and the primary's score
    head = f"{'engine':<{name_width}} {'run':>4} {'wait':>5} {'KV':>5} {'TTFT p95':>8} {'ITL p95':>7}"
    head += f" {'SM':>5} {'DRAM':>5}" if wide else ""
    stage_width = max(width - len(head) - 2, 8)
    head += "  primary stage" + (" " * 11 + "score" if wide else "")
    lines = [Text(crop(head, width), style="bold")]
    for engine in engines:
        e = reading.engines.get(engine.name, {})
        row = (
            f"{crop_left(engine.name, name_width):<{name_width}} {number(e.get('running'), '.0f'):>4} "
            f"{number(e.get('waiting'), '.0f'):>5} {number(e.get('kv'), '.2f'):>5} "
            f"{number(e.get('ttft_p95'), '.2f', 's'):>8} {number(e.get('itl_p95'), '.1f', 'ms', 1000):>7}"
        )
        if wide:
            sm, dram = _gpu_mean(reading, engine.name, "sm"), _gpu_mean(reading, engine.name, "dram")
            row += f" {number(sm, '.2f'):>5} {number(dram, '.2f'):>5}"
        line = Text(row + "  ")
        quiet = engine.quiet
        if engine.down:
            line.append(crop("down: last scrape failed", stage_width), style="bold red")
        else:
            line.append(f"{crop(engine.primary, stage_width):<24}", style="dim" if quiet else "bold yellow")
        if wide and not quiet:
            line.append(f"  {engine.score:.2f}")
        line.truncate(width, overflow="ellipsis")
        lines.append(line)
    if not engines:
        lines.append(Text(crop("  (no engine samples yet: the exporter's first collections)", width), style="dim"))
    return lines


def _hardware(reading: ExporterReading, status: DemoStatus, width: int) -> list[Text]:
    gpus = list(reading.gpus.values())
    gpu_line = (
        f"GPUs  {len(gpus)}: SM active {span((g.get('sm') for g in gpus), '.2f')}, "
        f"DRAM active {span((g.get('dram') for g in gpus), '.2f')}"
        if gpus
        else "GPUs  no samples from dcgm-exporter yet"
    )
    ports = list(reading.ports.values())
    if not ports:
        rdma_line = "RDMA  no ports on this node"
    else:
        tx, rx = span((p.get("tx") for p in ports), ".2f"), span((p.get("rx") for p in ports), ".2f")
        rdma_line = f"RDMA  {len(ports)} ports: tx {tx}, rx {rx}"
        rates = [v for p in ports for v in (p.get("tx"), p.get("rx")) if isinstance(v, float) and not math.isnan(v)]
        if rates and max(rates) < 0.005:  # reads 0.00: say why rather than leave it to look broken
            rdma_line += f" ({status.rdma_idle_reason})"
    return [Text(crop(gpu_line, width)), Text(crop(rdma_line, width))]


def _longest_fitting(head: Text, endings: list[str], width: int) -> str:
    """The first of `endings` (longest first) that fits after `head`; else the last, to be cropped."""
    return next((end for end in endings if head.cell_len + len(end) <= width), endings[-1])


def _groups(engines: list[_EngineView], enter: float, width: int, status: DemoStatus) -> list[Group]:
    """Engines grouped by primary stage, the strongest stage first, engines with none last; each
    heading says whether the phase expects that stage, since that is what the demo is checking."""
    by_stage: dict[str, list[_EngineView]] = {}
    for engine in engines:
        if not engine.down:
            by_stage.setdefault(engine.primary, []).append(engine)
    ordered = sorted(by_stage.items(), key=lambda i: (i[1][0].quiet, -max(e.score for e in i[1]), i[0]))
    groups = []
    for stage, members in ordered:
        names = engine_set([e.name for e in members], len(engines))
        top = max(members, key=lambda e: e.score)
        if stage in STATE_LINES:
            head = Text(f"{names} {STATE_LINES[stage]}", style="dim")
            head.truncate(width, overflow="ellipsis")
            groups.append(Group(head, [], []))
            continue
        if stage in NO_STAGE:
            head = Text(f"no bottleneck on {names}", style="bold green")
            why: list[Item] = []
            if top.scores and top.score == 0:
                head.append(": every stage scores 0")
            elif top.scores:
                nearest = f": nearest {top.nearest_stage} {top.score:.2f}"
                head.append(_longest_fitting(head, [nearest + f" (enters at {enter:g})", nearest], width))
                evidence = top.evidence_for(top.nearest_stage)
                if evidence and top.score > 0 and len(ordered) == 1:  # alone, say why it came close
                    why = [labelled_item("why", f"{top.name}: {evidence[0]}", width, "dim")]
            head.truncate(width, overflow="ellipsis")
            groups.append(Group(head, why, []))
            continue
        head = Text(stage, style="bold yellow")
        head.append(f" on {names}")
        if stage == status.expected_stage or stage in dict(status.expected_by_role).values():
            head.append(" · expected", style="green")
        elif stage in status.secondary_stages:
            head.append(" · expected secondary", style="yellow")
        else:
            head.append(f" · phase expects {status.expected_text}", style="bold red")
        head.truncate(width, overflow="ellipsis")
        if not top.scores:  # the /metrics gauge names a stage, but /diagnosis was read a round apart
            missing = "not in this round's /diagnosis (read between two collections); next refresh"
            groups.append(Group(head, [labelled_item("why", missing, width, "dim")], []))
            continue
        evidence = top.evidence_for(stage) or ["see /diagnosis"]
        why = [labelled_item("why", f"{top.name} {top.score:.2f}: {evidence[0]}", width)]
        why += [labelled_item("", line, width) for line in evidence[1:2]]
        do = [labelled_item("do", action, width, "green") for action in (top.actions or ["see /diagnosis"])[:3]]
        groups.append(Group(head, why, do))
    down = [e.name for e in engines if e.down]
    if down:
        head = Text(f"{engine_set(down, len(engines))} down", style="bold red")
        head.append(
            _longest_fitting(head, [": scrape failed, see llm_exporter_source_errors_total", ": scrape failed"], width)
        )
        head.truncate(width, overflow="ellipsis")
        groups.append(Group(head, [], []))
    return groups


def _pages(status: DemoStatus, width: int, budget: int, engines: int) -> list[Text]:
    if status.alertmanager_url is None:
        return [Text(crop("pages  Alertmanager not running (apt-get install prometheus-alertmanager)", width), "dim")]
    pending = f" · {len(status.pending_alerts)} pending" if status.pending_alerts else ""
    if status.pages is None:
        return [Text(crop("pages  Alertmanager not answering" + pending, width), style="dim")]
    if not status.pages:
        counts: dict[str, int] = {}
        for name in status.pending_alerts:
            counts[name] = counts.get(name, 0) + 1
        ordered_names = sorted(counts.items(), key=lambda i: (-i[1], i[0]))
        named = ", ".join(name + (f" ×{n}" if n > 1 else "") for name, n in ordered_names)
        return [Text(crop("pages  none firing" + (f" · pending {named}" if named else ""), width), style="green")]
    by_alert: dict[tuple[str, str], list[str]] = {}
    for page in status.pages:
        by_alert.setdefault((page.severity, page.alertname), []).append(page.engine)
    ordered = sorted(by_alert.items(), key=lambda item: (item[0][0] != "critical", item[0][1]))
    lines = []
    for index, ((severity, alertname), names) in enumerate(ordered):
        if index == budget - 1 and len(ordered) > budget:
            lines.append(Text(crop(f"       … {len(ordered) - index} more alerts{pending}", width), style="dim"))
            break
        where = engine_set(sorted({e for e in names if e}), engines) if any(names) else ""
        line = Text("pages  " if index == 0 else "       ", style="bold")
        line.append(f"{severity} ", style="bold red" if severity == "critical" else "yellow")
        line.append(alertname + (f" on {where}" if where else ""))
        line.truncate(width, overflow="ellipsis")
        lines.append(line)
    if pending and not any(line.plain.startswith("       …") for line in lines):
        # the pending count where it fits: after a page line with room, else a line of its own
        roomy = [line for line in lines if line.cell_len + len(pending) <= width]
        if roomy:
            roomy[-1].append(pending, style="dim")
        elif len(lines) < budget:
            lines.append(Text("       " + pending.lstrip(" ·"), style="dim"))
    return lines


def try_commands(status: DemoStatus) -> list[str]:
    """Commands a reader can paste while the demo runs: the same node through `once`, the diagnosis."""
    return [
        f"llm-bottleneck-exporter once --engine {status.engine_type}={status.simulator_url}/engine/0/metrics "
        f"--gpu dcgm-exporter={status.simulator_url}/gpu/metrics",
        f"curl -s {status.exporter_url}/diagnosis",
    ]


# ----------------------------------------------------------------------------------------- frames
def render_frame(
    status: DemoStatus, reading: ExporterReading, diagnosis: dict[str, Any] | None, width: int, height: int
) -> list[Text]:
    """The screen for a terminal of `width` x `height` cells, at most `height` lines of `width` cells."""
    engines = _engines(reading, diagnosis)
    roomy = height > MIN_HEIGHT
    if diagnosis is None:
        groups = [Group(Text(crop("diagnosis  /diagnosis not answering yet", width), style="dim"), [], [])]
    else:
        groups = _groups(engines, (diagnosis.get("thresholds") or {}).get("enter_score", 0.6), width, status)
    pages = _pages(status, width, 3 if roomy else 2, len(engines))
    body = _table(engines, reading, width) + _hardware(reading, status, width)
    needed = sum(group.minimum for group in groups)
    top = _header(status, width, 2)
    if height - len(top) - len(body) - len(pages) - 2 < needed:  # the note gives way to the diagnosis
        top = _header(status, width, 1)
    top += body
    alerts = f"{status.prometheus_url}/alerts" if status.prometheus_url else f"{status.exporter_url}/metrics"
    next_line = Text("next   ", style="bold")
    next_line.append(f"{status.exporter_url}/diagnosis  {alerts}")
    next_line.truncate(width, overflow="ellipsis")
    dashboard = Text(crop(f"       Grafana: {DASHBOARD} · Ctrl-C stops", width), style="dim")
    budget = height - len(top) - len(pages) - 2
    middle = fit_groups(groups, width, budget)
    spare = budget - len(middle)
    rule = Text("─" * width, style="dim")
    fitting = [line for line in try_commands(status) if len(line) <= width - 7]  # a cropped command is no use
    tries = [Text("try    " + line, style="dim") for line in fitting]
    lines = top + ([rule] if spare >= 2 else []) + middle + ([rule] if spare >= 2 else []) + pages
    lines += [next_line, dashboard] + (tries if spare >= 2 + len(tries) else [])
    return lines[:height]


def frame_text(lines: Sequence[Text]) -> str:
    """A frame as plain text (tests, the captures in docs/simulator.md)."""
    return "\n".join(line.plain.rstrip() for line in lines)


def plain_line(status: DemoStatus, reading: ExporterReading, diagnosis: dict[str, Any] | None) -> str:
    """One frame as one logfmt-style line: what a pipe or a log file gets instead of a redrawn screen."""
    engines = _engines(reading, diagnosis)
    counts: dict[str, int] = {}
    for engine in engines:
        counts[engine.primary] = counts.get(engine.primary, 0) + 1
    primary = ",".join(f"{stage}:{n}" for stage, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    fields = [
        f"t={status.simulated_seconds:.0f}s",
        f"phase={status.phase}",
        f"expected={status.expected_stage}",
    ]
    if status.window_filling:
        fields.append(f"window_filling={status.phase_seen_seconds:.0f}/{status.window_seconds:.0f}s")
    fields += [
        f"engines={len(engines)}",
        f"primary={primary or MISSING}",
    ]
    active = [e for e in engines if not e.quiet]
    if active:
        top = max(active, key=lambda e: e.score)
        fields.append(f"top={top.name}:{top.primary}:{top.score:.2f}")
    values = reading.engines.values()
    fields += [
        f"waiting={span((e.get('waiting') for e in values), '.0f')}",
        f"kv={span((e.get('kv') for e in values), '.2f')}",
        f"dram={span((g.get('dram') for g in reading.gpus.values()), '.2f')}",
        f"sm={span((g.get('sm') for g in reading.gpus.values()), '.2f')}",
        f"rdma_tx={span((p.get('tx') for p in reading.ports.values()), '.2f')}",
    ]
    if status.pages is not None:
        fields += [f"pages={len(status.pages)}", f"pending={len(status.pending_alerts)}"]
    return " ".join(fields)
