"""llm-bottleneck-exporter: a per-node daemon that tells which stage limits LLM serving."""

__version__ = "0.1.0"
