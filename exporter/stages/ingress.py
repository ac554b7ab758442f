"""Ingress: the gateway in front of the engines is the limit (its errors, queue, own time or
connections), while the engines behind it are healthy. Its dashboard row covers every stage
before the engine (the path scope): one gateway, one row."""

from __future__ import annotations

from typing import Any

from exporter.settings import Thresholds
from exporter.stages.evidence import engine_p95
from exporter.stages.panels import PanelDef, Query, Unit, prose, text, timeseries
from exporter.stages.path import PATH, PathReading
from exporter.stages.record import Alert, AlertContext, Fmt, PanelScope, Row, Stage, StageResult
from exporter.stages.registry import of, register
from exporter.stages.scoring import ramp

#: the codes a gateway answers for its upstreams' failures, quoted in the evidence
ERROR_CODES = ("502", "503", "504")
#: requests that ended without an answer the client waited for: aborted by it (499), timed out (408, 504)
ABANDONED_CODES = ("499", "408", "504")
_RARE = "a gateway is configured (gateways:, probes:)"


def score(r: PathReading, t: Thresholds) -> StageResult:
    result = StageResult()
    queue = ramp(r.queued, 0.0, t.waiting_requests)
    at_limit = ramp(
        r.connections / r.connections_limit if r.connections is not None and r.connections_limit else None, 0.8, 1.0
    )
    level = 1 - (1 - r.error_level) * (1 - r.slow_gateway) * (1 - 0.7 * queue) * (1 - 0.7 * at_limit)
    result.score = min(1.0, level) if r.engines_healthy else 0.0
    if r.error_share is not None:
        codes = ", ".join(f"{c}: {r.counts[c]:.0f}" for c in ERROR_CODES if r.counts.get(c))
        result.evidence.append(
            f"5xx {r.error_share:.1%} of {r.answered:.0f} responses in the window" + (f" ({codes})" if codes else "")
        )
    abandoned = {c: r.counts[c] for c in ABANDONED_CODES if r.counts.get(c)}
    if abandoned and r.answered:
        result.evidence.append(
            "client aborts and timeouts: "
            + ", ".join(f"{c}: {n:.0f}" for c, n in abandoned.items())
            + f" of {r.answered:.0f} responses in the window ({sum(abandoned.values()) / r.answered:.1%})"
        )
    own = r.own
    if own is not None and r.total is not None:
        result.evidence.append(
            f"gateway's own time {own * 1000:.0f} ms (mean request {r.total * 1000:.0f} ms"
            + (f", upstream {r.upstream * 1000:.0f} ms" if r.upstream is not None else "")
            + (f", engine e2e {r.engine * 1000:.0f} ms" if r.engine is not None else ", no engine e2e")
            + ")"
        )
    if r.queued:
        result.evidence.append(f"{r.queued:g} request(s) queued at the gateway for a backend")
    if at_limit:
        result.evidence.append(f"{r.connections:g} of {r.connections_limit:g} client connections in use")
    return result


def _errors_expr(a: AlertContext) -> str:
    def responses(*matchers: str) -> str:
        return f"sum by ({a.by_gateway}) (rate({a.series('llm_gateway_requests_total', *matchers)}[{a.rate_interval}]))"

    server_errors = 'code_class="5xx"'
    return (
        f"(\n  {responses(server_errors)}\n/\n  ({responses()} > 0)\n) > {a.alert_line('gateway_error_ratio'):g}\n"
        f"and\n{responses()} > {a.alert_line('gateway_min_requests_per_second'):g}"
    )


def _errors_description(a: AlertContext) -> str:
    return (
        f"{a.gateway} answered {a.value(Fmt.PERCENT)} of its requests with 5xx over {a.rate_interval} "
        "(502/503/504 in llm_gateway_requests_total{code}); see /diagnosis gateways for whether the engine "
        "behind it is down or the gateway itself is the limit."
    )


def _row(s: PanelScope) -> tuple[PanelDef, ...]:
    path = of(PATH)
    guide = prose(
        "Scored per **gateway** (`gateways:`, probes through it in `probes:`): "
        + "; ".join(f"*{stage.id}* when {stage.signature}" for stage in path)
        + ". The latency split is made from means over one window (never from quantiles): client → gateway, "
        "the gateway itself, gateway → engine, the engine. A 502/503 from a dead engine is the engine's "
        "(see its row), not ingress."
    )

    def per_gateway(title: str, query: Query, unit: str, key: str, width: int = 6, **options: Any) -> PanelDef:
        """A panel that is empty unless a gateway is configured."""
        return timeseries(title, query, unit=unit, width=width, key=key, rare=_RARE, **options)

    def by_gateway(op: str, expr: str, *labels: str) -> Query:
        return Query(
            f"{op} {s.by_node('gateway', *labels)} ({expr})", " ".join(f"{{{{{x}}}}}" for x in ("gateway", *labels))
        )

    return (
        text("Ingress: what to compare", guide, width=6, key="ingress-how"),
        per_gateway(
            "Score: " + " and ".join(stage.title for stage in path),
            by_gateway("max", s("llm_gateway_bottleneck_score"), "stage"),
            Unit.SCORE,
            "score-ingress",
            min=0,
            max=1,
            lines=s.score_lines(),
            description=f"The exporter's {' and '.join(stage.id for stage in path)} scores per gateway.",
        ),
        per_gateway(
            "Latency before and in the engine (window means)",
            by_gateway("max", s("llm_gateway_latency_component_seconds"), "component"),
            Unit.SECONDS,
            "ingress-components",
            description="Mean seconds per request in each part of the path: client_to_gateway, gateway, "
            "gateway_to_engine, engine.",
        ),
        per_gateway(
            "Gateway 5xx by code",
            by_gateway("sum", s.rate("llm_gateway_requests_total", 'code_class="5xx"'), "code"),
            Unit.REQUESTS_PER_SECOND,
            "gateway-errors",
            description="Server errors the gateway answered; code is 502/503/504 where it reports single codes.",
        ),
        per_gateway(
            "Probe end-to-end p95 by path",
            Query(
                s.quantile("llm_probe_e2e_latency_seconds", "0.95", s.by_node("probe", "path")), "{{probe}} {{path}}"
            ),
            Unit.SECONDS,
            "probe-e2e",
            width=8,
            description="The prober's tiny streamed completion, as a client sees it: through the gateway and direct.",
        ),
        engine_p95(s, "Engine end-to-end latency p95", "llm_engine_e2e_request_latency_seconds", width=8),
        per_gateway(
            "Requests queued at the gateway",
            by_gateway("sum", s("llm_gateway_requests_queued")),
            Unit.COUNT,
            "gateway-queued",
            width=8,
        ),
    )


STAGE = register(
    Stage(
        id="ingress",
        order=10,
        scope=PATH,
        title="ingress",
        colour="dark-purple",
        score=score,
        question="is the gateway the limit?",
        signature="the gateway's 5xx, queue or own time rise while its engines are healthy",
        reads="5xx share of the gateway's responses (ramp 1 %–10 %, at least 5 in the window), the gateway's own "
        "time against the engine's e2e (ramp 0.5×–2×), requests queued at the gateway (ramp to "
        "`waiting_requests`), client connections near the gateway's limit, backends down while the engines are up",
        guards="zero while an engine behind the gateway is down: its 502/503 are the engine's, and the evidence "
        "names the engine",
        lines=("waiting_requests",),
        actions=(
            "Compare the gateway's backend limits (HAProxy server maxconn and timeout queue, LiteLLM rpm/parallel "
            "limits, EPP flow-control capacity) with the engine's concurrency (max_num_seqs): a limit below it turns "
            "load into 503/504 at the gateway while the engine idles",
            "Look at the gateway's own CPU, TLS handshakes and routing plugins (llm_gateway_latency_component_seconds"
            '{component="gateway"}); scale the gateway out before the engines',
            "Read the gateway's logs for upstream timeouts and connection resets behind the 502/503/504",
        ),
        alerts=(
            Alert(
                "LLMGatewayErrors",
                "warning",
                "5m",
                "A gateway in front of LLM engines answers with server errors.",
                _errors_description,
                expr=_errors_expr,
            ),
        ),
        row=Row("Ingress / client network", _row, score_width=None, short="ingress"),
    )
)
