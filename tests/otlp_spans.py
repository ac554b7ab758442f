"""OTLP/HTTP exports as vLLM sends them, for the receiver's tests (unit and integration)."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue


def attribute(key: str, value: float | int | str) -> KeyValue:
    item = KeyValue(key=key)
    if isinstance(value, str):
        item.value.string_value = value
    elif isinstance(value, int):
        item.value.int_value = value
    else:
        item.value.double_value = value
    return item


def export(
    *requests_: tuple[float, float, int], model: str | None = "tiny", extra_span: bool = False, service: str = "vllm"
) -> bytes:
    """An export as vLLM's OTLPSpanExporter sends it: one `llm_request` span per request with
    (ttft, e2e, completion tokens), attribute names as vllm/tracing/utils.py spells them; `model`
    None leaves `gen_ai.response.model` out, as vLLM's output processor does."""
    payload = ExportTraceServiceRequest()
    resource = payload.resource_spans.add()
    resource.resource.attributes.append(attribute("service.name", service))
    scope = resource.scope_spans.add()
    for ttft, e2e, tokens in requests_:
        span = scope.spans.add(name="llm_request")
        if model is not None:
            span.attributes.append(attribute("gen_ai.response.model", model))
        span.attributes.extend(
            [
                attribute("gen_ai.latency.time_to_first_token", ttft),
                attribute("gen_ai.latency.e2e", e2e),
                attribute("gen_ai.latency.time_in_queue", 0.01),
                attribute("gen_ai.usage.prompt_tokens", 100),
                attribute("gen_ai.usage.completion_tokens", tokens),
            ]
        )
    if extra_span:
        scope.spans.add(name="http.request")
    return payload.SerializeToString()
