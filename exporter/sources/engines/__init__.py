"""Engine schemas: each maps one engine's exposition into `EngineReading`s.

Detection order matters: Triton's TensorRT-LLM families are checked first (Triton core's own
`nv_inference_*` names mean Triton only when no `vllm:` family is there: the vLLM backend's subset
is read by the vLLM mapping), and trtllm's unprefixed early names last.
"""

from __future__ import annotations

from exporter.sources.engines.common import DeclarativeMapping
from exporter.sources.engines.sglang import SglangMapping
from exporter.sources.engines.tgi import TgiMapping
from exporter.sources.engines.triton import TritonMapping
from exporter.sources.engines.trtllm import TrtllmMapping
from exporter.sources.engines.vllm import VllmMapping

MAPPINGS: dict[str, DeclarativeMapping] = {
    m.engine_type: m for m in (TritonMapping(), VllmMapping(), SglangMapping(), TgiMapping(), TrtllmMapping())
}
ENGINE_TYPES = tuple(sorted(MAPPINGS))


def detect(names: set[str]) -> DeclarativeMapping | None:
    """The mapping whose families appear in a payload's sample names, or None."""
    for mapping in MAPPINGS.values():
        if mapping.matches(names):
            return mapping
    return None
