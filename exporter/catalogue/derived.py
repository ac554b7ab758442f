"""What the exporter works out rather than reads: the bottleneck diagnosis (exporter/diagnosis/),
latency SLOs (exporter/slo/, docs/slo.md), per-request data from the engines' OTLP spans
(exporter/slo/otlp.py) and capacity headroom (exporter/slo/headroom.py)."""

from __future__ import annotations

from exporter.catalogue.spec import (
    ENGINE_LABELS,
    ENGINE_SERIES_LABELS,
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
            "edge at or below the threshold. Events are requests (ttft, e2e) or inter-token gaps (itl).",
        ),
        gauge(
            "llm_slo_attainment_upper_bound_ratio",
            "Upper bound of the same fraction, counted at the smallest bucket edge at or above the threshold; equal "
            "to llm_slo_attainment_ratio when the threshold is a bucket edge.",
        ),
        gauge(
            "llm_slo_goodput_requests_per_second",
            "Requests per second within the SLO threshold over the window (the lower-bound attainment times the "
            "completed-request rate).",
        ),
        counter(
            "llm_slo_events_total",
            "Events the SLO dimension judges (the engine histogram's count): the error-budget rules rate it.",
        ),
        counter(
            "llm_slo_good_events_total",
            "Of those, events within the threshold (lower bound, at the largest bucket edge at or below it).",
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
)
