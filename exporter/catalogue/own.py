"""The exporter's own families: its sources' health, discovery, reloads and build, and the profiles
it took by itself (`profile: {auto: true}`, docs/health.md)."""

from __future__ import annotations

from exporter.catalogue.spec import SOURCE_LABELS, MetricSpec, counter, families, gauge

EXPORTER_FAMILIES: tuple[MetricSpec, ...] = families(
    SOURCE_LABELS,
    gauge("llm_exporter_source_up", "1 if the source's last collection succeeded within its timeout."),
    gauge("llm_exporter_collect_duration_seconds", "Wall time of the source's last collection."),
    counter(
        "llm_exporter_source_errors_total",
        "Failed collections by reason (timeout, connection, http_status, too_large, parse, cardinality, "
        "exception), and collections that succeeded but left part of their output out: cardinality (over a model "
        "or series budget; source exporter, target empty for the node-wide cap), invalid_value (values that "
        "cannot be true, dropped) or malformed_line (lines of the families read that neither the text format nor "
        "OpenMetrics allows, dropped; engines and gateways).",
        "reason",
    ),
) + families(
    (),
    gauge(
        "llm_exporter_discovery_targets",
        "Engine pods discovery found, by state: scraped, or dropped because more asked than "
        "kubernetes.max_engines (pods holding GPUs first, then round-robin across namespaces and owners).",
        "state",
    ),
    counter(
        "llm_exporter_config_reloads_total",
        "Configuration reloads on SIGHUP by result (success, failure); a failed reload keeps the running "
        "configuration.",
        "result",
    ),
    gauge(
        "llm_exporter_build_info",
        "Always 1; labels carry the exporter version and Python version.",
        "version",
        "python_version",
    ),
)

#: what the exporter's automatic profiles leave (exporter/profile/auto.py)
PROFILE_FAMILIES: tuple[MetricSpec, ...] = families(
    ("engine",),
    counter(
        "llm_engine_profile_captures_total",
        "Automatic profile captures of the engine by result: ok (a trace written), off (the engine was not "
        "launched with its profiler; /diagnosis has the message), failed.",
        "result",
    ),
    gauge(
        "llm_engine_profile_info",
        "Always 1; labels carry the engine's last automatic capture that wrote a trace: the stage that held, "
        "the trace directory and the trace summarized. The stage alerts name it.",
        "stage",
        "directory",
        "trace",
    ),
)
