"""A profile when it matters: an opt-in, bounded capture through the engine's own profiling
endpoint (vLLM `/start_profile` and `/stop_profile` when launched with `--profiler-config`; SGLang
`/start_profile` with a step count), and a summary of the Chrome trace it writes (summary.py).
Never on by default; `llm-bottleneck-exporter profile --engine NAME [--seconds S]` takes one."""
