"""Engine schemas: each maps one engine's exposition into `EngineReading`s.

Detection order matters: Triton's TensorRT-LLM families are checked first (Triton core's own
`nv_inference_*` names mean Triton only when no `vllm:` family is there: the vLLM backend's subset
is read by the vLLM mapping), and trtllm's unprefixed early names last.
"""

from __future__ import annotations

from exporter.settings import ENGINE_TYPES
from exporter.sources.engines.common import EngineMapping
from exporter.sources.engines.sglang import SglangMapping
from exporter.sources.engines.tgi import TgiMapping
from exporter.sources.engines.triton import TritonMapping
from exporter.sources.engines.trtllm import TrtllmMapping
from exporter.sources.engines.vllm import VllmMapping

MAPPINGS: dict[str, EngineMapping] = {
    m.engine_type: m for m in (TritonMapping(), VllmMapping(), SglangMapping(), TgiMapping(), TrtllmMapping())
}
# The configuration validates `type:` against the settings' list: keep both the same.
assert tuple(sorted(MAPPINGS)) == ENGINE_TYPES, "exporter.settings.ENGINE_TYPES must name every mapping"


def detect(names: set[str]) -> EngineMapping | None:
    """The mapping whose families appear in a payload's sample names, or None."""
    for mapping in MAPPINGS.values():
        if mapping.matches(names):
            return mapping
    return None
