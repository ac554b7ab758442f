"""vLLM exposition text with many served-model names, for the output-budget tests and benchmark.

Each model gets two wanted series (running requests and a +Inf-only time-to-first-token
histogram), so 5,000 models are exactly the default input cap (`max_series` 10,000) and pass it,
while each exports 7 series (up, running, and a summary of 5).
"""

from __future__ import annotations

SERIES_PER_MODEL = 7


def model_names(count: int) -> list[str]:
    return [f"model-{index:05d}" for index in range(count)]


def vllm_text(models: list[str], running: float = 1.0) -> str:
    lines = [
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        *(f'vllm:num_requests_running{{model_name="{model}"}} {running}' for model in models),
        "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.",
        "# TYPE vllm:time_to_first_token_seconds histogram",
        *(f'vllm:time_to_first_token_seconds_bucket{{le="+Inf",model_name="{model}"}} 3.0' for model in models),
    ]
    return "\n".join(lines) + "\n"
