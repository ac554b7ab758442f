"""The request path around the engines: gateways (exporter/sources/gateway.py), the path's own
diagnosis before the engine, and probes (exporter/sources/probe.py)."""

from __future__ import annotations

from exporter.catalogue.spec import GATEWAY_LABELS, PROBE_LABELS, MetricSpec, counter, families, gauge, summary

GATEWAY_FAMILIES: tuple[MetricSpec, ...] = families(
    GATEWAY_LABELS,
    gauge("llm_gateway_up", "1 if the last scrape of the gateway succeeded and parsed, else 0."),
    counter(
        "llm_gateway_requests_total",
        "Responses the gateway sent, by status class (1xx-5xx); code carries 408, 429, 499, 502, 503 or 504 where "
        "the gateway reports single codes, else it is empty. Requests the client abandoned before a response are "
        '4xx with code 499 (HAProxy counts them as code="other").',
        "code_class",
        "code",
    ),
    summary(
        "llm_gateway_request_duration_seconds",
        "Whole request as the gateway times it; quantiles over the exporter's window from the gateway's histogram.",
    ),
    summary(
        "llm_gateway_time_to_first_token_seconds",
        "Time to first token as the gateway times it (its clock: docs/metrics.md); windowed quantiles.",
    ),
    summary(
        "llm_gateway_upstream_duration_seconds",
        "Time the gateway waited on its upstream (the engine and the hop to it); windowed quantiles.",
    ),
    summary("llm_gateway_queue_time_seconds", "Time requests waited in the gateway's own queue; windowed quantiles."),
    summary(
        "llm_gateway_kv_transfer_estimate_seconds",
        "A router's estimate of the disaggregated KV transfer (Dynamo: the prefill's completion to the first "
        "decode token), an upper bound that includes the decode worker's admission and first step, not the "
        "transfer time; windowed quantiles.",
    ),
    summary(
        "llm_gateway_step_duration_seconds",
        "A disaggregating proxy's pipeline step as it times it, the backend call included (llm-d's P/D "
        "coordinator: render, replace-media-urls, encode, prefill, conditional-decode, decode); windowed quantiles.",
        "step",
    ),
    gauge(
        "llm_gateway_average_seconds",
        "A mean the gateway computes itself, by phase (request_duration, upstream_duration, queue_time); "
        "HAProxy: over each backend's last 1024 requests, the busiest backend's.",
        "phase",
    ),
    gauge("llm_gateway_requests_in_flight", "Requests in flight through the gateway."),
    gauge("llm_gateway_requests_queued", "Requests waiting in the gateway for a backend."),
    gauge("llm_gateway_connections_active", "Client connections open at the gateway."),
    gauge(
        "llm_gateway_connections_limit",
        "The most client connections the gateway accepts (HAProxy: the frontends' maxconn).",
    ),
    gauge(
        "llm_gateway_backends",
        "Backends (servers, endpoints, deployments) the gateway routes to, by state (up, down).",
        "state",
    ),
    counter("llm_gateway_upstream_connection_errors_total", "Failed connections from the gateway to its backends."),
    gauge(
        "llm_gateway_access_log_up",
        "1 while the exporter listens for the gateway's access log (gateways[].access_log), else 0.",
    ),
    counter(
        "llm_gateway_access_log_lines_total",
        "Access-log lines received, by result: counted (in the latency histograms), not_counted (a failure the "
        "gateway answered, an aborted or early-logged request, the stats frontend), unparsed, refused_sender "
        "(a datagram from neither loopback nor the gateway's address).",
        "result",
    ),
    gauge(
        "llm_gateway_latency_component_seconds",
        "Mean latency of one part of the path over the diagnosis window, from means (never quantiles): "
        "client_to_gateway, gateway, gateway_to_engine, engine.",
        "component",
    ),
    gauge(
        "llm_gateway_bottleneck_score",
        "How strongly the evidence points at this stage before the engine (docs/stages.md) for the path through "
        "the gateway, 0-1.",
        "stage",
    ),
    gauge(
        "llm_gateway_bottleneck_primary",
        "One-hot over stage (the stages before the engine, and none): the path's main bottleneck before the engine.",
        "stage",
    ),
    gauge(
        "llm_gateway_slices_folded",
        "Values of a slice dimension (docs/metrics.md, Slices: LiteLLM's team or key alias, the EPP's objective, "
        'target model and priority) folded into slice="other" past max_slices_per_dimension.',
        "slice_by",
    ),
)
PROBE_FAMILIES: tuple[MetricSpec, ...] = families(
    PROBE_LABELS,
    gauge("llm_probe_up", "1 if the probe's last request on this path succeeded, else 0."),
    counter("llm_probe_success_total", "Probes that streamed a completion to its end."),
    counter(
        "llm_probe_failures_total",
        "Failed probes by reason: connect, tls, http_status, timeout, malformed_stream.",
        "reason",
    ),
    summary(
        "llm_probe_time_to_first_token_seconds",
        "Client-observed time to first token: request sent → first streamed token; quantiles over the window.",
    ),
    summary(
        "llm_probe_e2e_latency_seconds",
        "Client-observed end-to-end time: request sent → stream complete; quantiles over the window.",
    ),
)
