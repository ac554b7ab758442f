"""An autoscaling planner's own figures, read beside the exporter's: NVIDIA Dynamo's planner.

Dynamo's planner (ai-dynamo/dynamo, components/src/dynamo/planner/monitoring/planner_metrics.py)
exports plain gauges on its Prometheus port: the replicas of each pool now
(`dynamo_planner_num_{prefill,decode}_replicas`) and the ones it decided
(`…_predicted_num_{prefill,decode}_replicas`; in its advisory mode it decides without scaling), the
TTFT and ITL it observes and the ones its regression estimates (`…_observed_ttft_ms`,
`…_estimated_ttft_ms`, and `_itl_ms`), the request rate it predicts and one engine's capacity per
pool under its SLA. Newer planners label every series `model_name`; older ones label nothing, so
the model comes from the configuration (`planners[].model`).

Normalized into `llm_planner_*` (milliseconds to seconds), so the exporter's desired replicas and
capacity read beside the planner's (exporter/slo/monitor.py puts the difference in /diagnosis).
"""

from __future__ import annotations

from collections.abc import Iterator

from exporter.model import Metric, Sample
from exporter.promtext import ParsedSamples, WantedParser
from exporter.settings import PlannerTarget
from exporter.sources.base import Source, SourceError
from exporter.sources.http_fetch import HttpClient, feed_parser, open_body, redact
from exporter.sources.scrape_auth import authorizer

_P = "dynamo_planner_"
#: Dynamo's gauge -> (family, labels of ours)
REPLICAS = {
    _P + "num_prefill_replicas": {"role": "prefill", "kind": "current"},
    _P + "num_decode_replicas": {"role": "decode", "kind": "current"},
    _P + "predicted_num_prefill_replicas": {"role": "prefill", "kind": "recommended"},
    _P + "predicted_num_decode_replicas": {"role": "decode", "kind": "recommended"},
}
LATENCIES_MS = {
    _P + "observed_ttft_ms": {"dimension": "ttft", "kind": "observed"},
    _P + "observed_itl_ms": {"dimension": "itl", "kind": "observed"},
    _P + "estimated_ttft_ms": {"dimension": "ttft", "kind": "estimated"},
    _P + "estimated_itl_ms": {"dimension": "itl", "kind": "estimated"},
}
CAPACITY = {
    _P + "engine_prefill_capacity_requests_per_second": {"role": "prefill"},
    _P + "engine_decode_capacity_requests_per_second": {"role": "decode"},
}
RATES = {
    _P + "observed_requests_per_second": {"kind": "observed"},
    _P + "predicted_requests_per_second": {"kind": "predicted"},
}
WANTED = frozenset({*REPLICAS, *LATENCIES_MS, *CAPACITY, *RATES})


class PlannerSource(Source):
    name = "planner"

    def __init__(self, target: PlannerTarget) -> None:
        self.config = target
        self.target = target.name
        self.timeout_seconds = target.limits.timeout_seconds
        self._client = HttpClient(auth=authorizer(target.auth))
        self._shown_url = redact(target.url)

    async def collect(self, now: float) -> list[Metric]:
        limits = self.config.limits
        parser = WantedParser(WANTED, limits.max_series, limits.max_label_value_length)
        async with open_body(self._client, self.config.url, self.timeout_seconds, limits.max_response_bytes) as body:
            await feed_parser(body, parser, self._shown_url)
        parsed = parser.result
        if not any(parsed.get(name) for name in (*REPLICAS, *LATENCIES_MS)):
            raise SourceError("parse", f"{self._shown_url}: no dynamo_planner_* replicas or latencies")
        return [Sample("llm_planner_up", {"planner": self.target}, 1.0), *self._normalized(parsed)]

    def _normalized(self, parsed: ParsedSamples) -> Iterator[Metric]:
        for families, family, scale in (
            (REPLICAS, "llm_planner_replicas", 1.0),
            (LATENCIES_MS, "llm_planner_latency_seconds", 0.001),
            (CAPACITY, "llm_planner_engine_capacity_requests_per_second", 1.0),
            (RATES, "llm_planner_requests_per_second", 1.0),
        ):
            for name, extra in families.items():
                for series, value in parsed.get(name, {}).items():
                    model = dict(series).get("model_name") or self.config.model or ""
                    labels = {"planner": self.target, "model": model, **extra}
                    yield Sample(family, labels, value * scale)

    def down_metrics(self) -> list[Metric]:
        return [Sample("llm_planner_up", {"planner": self.target}, 0.0)]

    def close(self) -> None:
        self._client.close()
