"""Which SLO dimensions an engine's own histograms judge a request on, when a request has two legs.

A disaggregated request passes a prefill worker (its leg: the prompt, answered with one token)
and a decode worker (the rest). Both engines count it, each in its own histograms; judging both
would count every request twice and put the prefill legs' one-token answers among the requests'
latencies. So a request of a disaggregated model is judged once, where it ends:

- `e2e` and `itl` on the decode worker: its answer's token gaps are all there, and it finishes
  the request. Its end-to-end clock starts when its own leg arrives, so where the prefill leg runs
  first (vLLM's P/D proxies, llm-d) it leaves that leg out: the gateway's figure is the whole;
- `ttft` on the decode worker only where its clock starts with the request: SGLang's router sends
  both legs at once, bound by one bootstrap room, so the decode worker's time to first token holds
  the prefill leg's queue and compute and the transfer. vLLM's proxies send the decode leg once the
  prefill leg has answered, and vLLM times the first token from its own arrival
  (`arrival_time`), so its decode TTFT leaves out the prefill leg: no engine sees the request's
  whole TTFT there, and it is judged only nearer the client (`measured_at="gateway"` or `probe`,
  exporter/slo/points.py);
- nothing on the prefill worker.

A unified engine judges every dimension, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from exporter.model import Metric, QuantileSummary
from exporter.settings import SloTarget
from exporter.slo.selectors import covers

ALL_DIMENSIONS = frozenset({"ttft", "itl", "e2e"})
#: engine types whose decode worker receives a request together with its prefill worker, so that
#: its time to first token starts at the request's arrival
DECODE_TTFT_HOLDS_PREFILL = frozenset({"sglang"})
_DECODE_ONLY = frozenset({"itl", "e2e"})


def judged_dimensions(labels: Mapping[str, str]) -> frozenset[str]:
    """The dimensions an engine series with these labels is judged on (all for a non-engine point)."""
    role = labels.get("role")
    if role == "prefill":
        return frozenset()
    if role == "decode" and labels.get("engine_type", "") not in DECODE_TTFT_HOLDS_PREFILL:
        return _DECODE_ONLY
    return ALL_DIMENSIONS


@dataclass(frozen=True)
class NotJudged:
    """An SLO dimension an engine has a histogram of but is not judged on, and why; for a prefill
    worker every dimension at once (`dimension` empty)."""

    slo: SloTarget
    dimension: str
    labels: dict[str, str]
    #: a gateway or probe judges the same SLO and dimension (the decode worker's TTFT left out)
    judged_nearer: bool = False

    def line(self) -> str:
        if not self.dimension:
            return (
                f"SLO {self.slo.name} not judged on this prefill worker: its leg is part of a request that "
                "ends on a decode worker, where the request is counted once"
            )
        where = (
            "it is judged at the gateway or probe"
            if self.judged_nearer
            else "no gateway or probe here measures it, so it is not judged at all"
        )
        return (
            f"SLO {self.slo.name} ttft not judged on this decode worker: its time to first token starts when "
            f"the prefill leg has answered, so no engine sees a disaggregated request's whole TTFT; {where}"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "slo": self.slo.name,
            "dimension": self.dimension or "all",
            "point": {k: v for k, v in self.labels.items() if k in ("engine", "model", "role")},
            "why": self.line(),
        }


def not_judged(
    slos: Sequence[SloTarget], metrics: Iterable[Metric], families: Mapping[str, str], nearer: set[tuple[str, str]]
) -> list[NotJudged]:
    """Each SLO an engine's histograms are left out of by `judged_dimensions`, per engine and model
    (per dimension on a decode worker); `nearer` holds the (SLO, dimension) pairs a gateway or
    probe judged this snapshot."""
    by_family = {family: dimension for dimension, family in families.items()}
    found: dict[tuple[str, str, str, str], NotJudged] = {}
    for m in metrics:
        dimension = by_family.get(m.name)
        if dimension is None or not isinstance(m, QuantileSummary) or m.histogram is None:
            continue
        judged = judged_dimensions(m.labels)
        if dimension in judged:
            continue
        engine, model = m.labels.get("engine", ""), m.labels.get("model", "")
        for slo in slos:
            if dimension not in dict(slo.thresholds()) or not covers(slo, engine, model):
                continue
            which = dimension if judged else ""
            found.setdefault(
                (slo.name, which, engine, model),
                NotJudged(slo, which, dict(m.labels), (slo.name, dimension) in nearer),
            )
    return list(found.values())
