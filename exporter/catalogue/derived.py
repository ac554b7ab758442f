"""What the exporter works out rather than reads: the bottleneck diagnosis (exporter/diagnosis/),
latency SLOs (exporter/slo/, docs/slo.md), per-request data from the engines' OTLP spans
(exporter/slo/otlp.py), capacity headroom (exporter/slo/headroom.py), the decisions made from it
(replicas, concurrency, cost: docs/capacity.md) and an outside planner's figures beside them."""

from __future__ import annotations

from exporter.catalogue.engines import SLICE_LABELS
from exporter.catalogue.spec import (
    ENGINE_LABELS,
    ENGINE_SERIES_LABELS,
    PLANNER_LABELS,
    SLO_LABELS,
    SLO_SERIES_LABELS,
    MetricSpec,
    counter,
    families,
    gauge,
    summary,
)

BOTTLENECK_FAMILIES: tuple[MetricSpec, ...] = families(
    ENGINE_LABELS,
    gauge(
        "llm_bottleneck_score",
        "How strongly the evidence points at this stage as the bottleneck, 0-1.",
        "role",
        "stage",
    ),
    gauge(
        "llm_bottleneck_active",
        "1 while the stage's score is past its threshold (with hysteresis).",
        "role",
        "stage",
    ),
    gauge(
        "llm_bottleneck_primary",
        "One-hot over stage (including none): the engine's main bottleneck now.",
        "role",
        "stage",
    ),
    gauge(
        "llm_engine_state",
        "One-hot over state, the engine's state in the diagnosis (docs/diagnosis.md): up (judged), down, asleep, "
        "loading (its process runs, its metrics do not answer), warming_up (the cold regime after a start or wake).",
        "state",
    ),
    gauge(
        "llm_bottleneck_slice_score",
        "Per slice (docs/metrics.md, Slices), the score of the stages a slice can suffer alone: queueing, from the "
        "slice's own waiting requests (a low priority class waits while a high one runs). The other stages are "
        "the engine's, shared by every slice.",
        "role",
        "stage",
        *SLICE_LABELS,
    ),
)
SLO_FAMILIES: tuple[MetricSpec, ...] = (
    families(
        SLO_LABELS,
        gauge("llm_slo_objective_ratio", "The SLO's objective: the fraction of events that must meet it."),
        gauge("llm_slo_threshold_seconds", "The SLO's threshold for one dimension.", "dimension"),
    )
    + families(
        SLO_SERIES_LABELS,
        gauge(
            "llm_slo_attainment_ratio",
            "Fraction of the window's events within the SLO threshold, a lower bound: counted at the largest bucket "
            "edge at or below the threshold. Events are requests (ttft, e2e; a request refused at the door is one, "
            "missed) or inter-token gaps (itl). measured_at says where: engine (its own histograms and admission "
            "rejections), gateway (the gateway's, every request through it, and its 429/503), probe (the prober's "
            "own requests through the gateway).",
        ),
        gauge(
            "llm_slo_attainment_upper_bound_ratio",
            "Upper bound of the same fraction, counted at the smallest bucket edge at or above the threshold; equal "
            "to llm_slo_attainment_ratio when the threshold is a bucket edge.",
        ),
        gauge(
            "llm_slo_goodput_requests_per_second",
            "The completed-request rate over the window times the lower-bound attainment, whose events count the "
            "requests refused at the door (admission limits, a gateway's 429/503) as misses: the rate of requests "
            "served within the SLO, discounted by the share of demand refused.",
        ),
        counter(
            "llm_slo_events_total",
            "Events the SLO dimension judges (the measuring point's histogram count, and the requests refused at "
            "the door it lacks, for ttft and e2e): the error-budget rules rate it.",
        ),
        counter(
            "llm_slo_good_events_total",
            "Of those, events within the threshold (lower bound, at the largest bucket edge at or below it; less the "
            "refusals a gateway's histogram holds as requests).",
        ),
        gauge(
            "llm_slo_slice_attainment_ratio",
            "llm_slo_attainment_ratio per slice (tenant, adapter, priority class: docs/metrics.md, Slices), from the "
            "slice's own histogram where the source carries one, at the engine or the gateway (measured_at); over "
            "its served requests (refusals carry no slice).",
            *SLICE_LABELS,
        ),
        gauge(
            "llm_slo_slice_goodput_requests_per_second",
            "llm_slo_goodput_requests_per_second per slice: its attainment times its completed-request rate.",
            *SLICE_LABELS,
        ),
    )
    + families(
        SLO_LABELS + ENGINE_LABELS,
        gauge(
            "llm_slo_joint_attainment_ratio",
            "Fraction of the window's requests meeting every threshold of the SLO at once, from the engine's request "
            "spans (OTLP); as vLLM bench's --goodput counts good requests.",
        ),
        gauge(
            "llm_slo_joint_goodput_requests_per_second",
            "Requests per second meeting every threshold of the SLO at once, from the engine's request spans.",
        ),
    )
)
REQUEST_FAMILIES: tuple[MetricSpec, ...] = families(
    ENGINE_LABELS,
    summary(
        "llm_request_prompt_tokens",
        "Prompt tokens per request (the request mix), from the engine's request spans: quantiles over the "
        "window, cumulative count and sum.",
    ),
    summary(
        "llm_request_generation_tokens", "Output tokens per request (the request mix), from the engine's request spans."
    ),
) + families(
    (),
    counter(
        "llm_otlp_spans_total",
        "Spans the OTLP receiver got, by result: recorded (a request span), ignored (another span), rate_limited "
        "(over otlp.max_spans_per_second, dropped); refused: unknown_sender (not from a scraped engine's address), "
        "unknown_model (no engine reports it), ambiguous_engine, label_too_long, too_many_models.",
        "result",
    ),
    counter(
        "llm_otlp_payloads_total",
        "OTLP/HTTP export requests by result: ok, too_large (over otlp.max_body_bytes), bad_request, busy, "
        "rate_limited (over otlp.max_client_bytes_per_second).",
        "result",
    ),
)
CAPACITY_FAMILIES: tuple[MetricSpec, ...] = families(
    ENGINE_SERIES_LABELS,
    gauge(
        "llm_capacity_max_request_rate",
        "Estimated largest request rate (req/s) the engine can take at the current request mix while still "
        "meeting the SLO.",
        "slo",
    ),
    gauge(
        "llm_capacity_max_concurrency",
        "Estimated largest number of running requests at which the SLO is still met.",
        "slo",
    ),
    gauge(
        "llm_capacity_headroom_ratio",
        "1 - current request rate / llm_capacity_max_request_rate: the fraction of capacity still free under the "
        "SLO (negative when the SLO is already broken by load).",
        "slo",
    ),
    gauge(
        "llm_capacity_estimate_confidence_ratio",
        "Confidence 0-1 in the capacity estimate: how much of it rests on the engine's own measured load points "
        "rather than on the model alone.",
        "slo",
    ),
    gauge(
        "llm_capacity_desired_replicas",
        "Replicas of this engine's capacity under the SLO that its demand needs at capacity.target_utilization "
        "(fractional, held high for capacity.scale_down_stabilization_seconds); a model's need is the sum over its "
        "replicas, recorded as slo_model:llm_capacity_desired_replicas:ceil.",
        "slo",
    ),
    gauge(
        "llm_capacity_recommended_concurrency",
        "The largest running batch at which the SLO still holds at the current request mix, for the SLO that binds "
        "first: what max_num_seqs should be near.",
        "slo",
    ),
    gauge(
        "llm_capacity_recommended_throughput_tokens_per_second",
        "Generated tokens per second at the recommended concurrency (its request rate times the window's mean answer).",
        "slo",
    ),
    gauge(
        "llm_capacity_configured_concurrency",
        "The max_num_seqs the engine runs with, as configured in capacity.max_num_seqs.",
    ),
)
COST_FAMILIES: tuple[MetricSpec, ...] = families(
    ENGINE_SERIES_LABELS,
    gauge("llm_cost_per_hour", "Price of the engine's GPUs per hour (capacity.gpu_hour_price by gpu_model)."),
    gauge(
        "llm_cost_per_request",
        'GPU cost of one completed request: at load="current" over the window, at load="slo_capacity" at the '
        "largest rate the SLO (slo label) allows at the same mix.",
        "load",
        "slo",
    ),
    gauge(
        "llm_cost_per_million_tokens",
        "GPU cost of a million prompt or generated tokens (tokens label), the GPU time split by the time requests "
        "spend in prefill and in decode; load as for llm_cost_per_request.",
        "tokens",
        "load",
        "slo",
    ),
)
PLANNER_FAMILIES: tuple[MetricSpec, ...] = families(
    ("planner",),
    gauge("llm_planner_up", "1 if the last scrape of the planner succeeded and parsed, else 0."),
) + families(
    PLANNER_LABELS,
    gauge(
        "llm_planner_replicas",
        "The planner's replicas per pool (role prefill or decode): kind current, or recommended (what it decided).",
        "role",
        "kind",
    ),
    gauge(
        "llm_planner_latency_seconds",
        "The planner's TTFT and ITL (dimension): kind observed, or estimated by its own model.",
        "dimension",
        "kind",
    ),
    gauge(
        "llm_planner_engine_capacity_requests_per_second",
        "One engine's capacity under the planner's SLA, per pool (role).",
        "role",
    ),
    gauge("llm_planner_requests_per_second", "Request rate the planner observed or predicts (kind).", "kind"),
)
