"""Latency SLOs: attainment and goodput from the engines' histograms, capacity headroom, and
(opt-in) per-request attainment from the engines' OpenTelemetry request spans.

A pipeline component like the diagnosis: it reads normalized samples only (the latency summaries
carry their window histograms) and the `slos:` settings, and adds `llm_slo_*` and
`llm_capacity_*` samples to the snapshot in `Exporter.publish`. docs/slo.md says what each
figure means and where it is exact or bounded.
"""
