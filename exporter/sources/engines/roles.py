"""Which part of a disaggregated deployment an engine is: unified, prefill, decode or encode.

In order of trust:
1. what the operator says: the engine's `role:` in the configuration, or its pod's
   `llm-bottleneck-exporter/role` annotation or llm-d's `llm-d.ai/role` label (discovery);
2. the engine's own labels: SGLang's `engine_type` (unified, prefill, decode), Dynamo's
   `worker_type` and TensorRT-LLM's `disaggregation_mode` on their series;
3. the launch configuration the engine exports: vLLM creates
   `vllm:num_requests_kv_fetch_by_stage` only on a KV consumer (`kv_role` kv_consumer or kv_both),
   so a vLLM without it that hands KV over is a producer;
4. which series move, over the exporter's window (marked `inferred`): KV arriving by transfer
   (vLLM's `external_kv_transfer` prompt tokens), reads observed on this side (NIXL, Mooncake), or
   requests waiting for remote KV make a decode worker; held KV expiring, KV waiting to be sent,
   or, where a connector's families are there, every finished request being one token long (the
   P/D proxy's prefill leg asks for `max_tokens` 1) make a prefill worker. An inferred role stays
   through an idle window: a decode worker without traffic for a minute is still one.

Until anything says otherwise an engine is unified.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from exporter.model import EngineReading
from exporter.promtext import ParsedSamples
from exporter.sources.engines.kv_transfer import FETCH_BY_STAGE, KvTransferReading
from exporter.window import DeltaWindow

UNIFIED = "unified"
#: the words engines and deployments use, and the role each one means
ROLE_WORDS = {
    "unified": UNIFIED,
    "aggregated": UNIFIED,
    "agg": UNIFIED,
    "both": UNIFIED,
    "prefill-decode": UNIFIED,
    "prefill_and_decode": UNIFIED,
    "context_and_generation": UNIFIED,
    "null": UNIFIED,
    "prefill": "prefill",
    "context": "prefill",
    "context_only": "prefill",
    "kv_producer": "prefill",
    "decode": "decode",
    "generation": "decode",
    "generation_only": "decode",
    "kv_consumer": "decode",
    "encode": "encode",
    "encoder": "encode",
}
#: engine series labels that carry the role (SGLang; Dynamo; TensorRT-LLM's collector)
ROLE_LABELS = ("engine_type", "worker_type", "disaggregation_mode")
#: the engine types whose `engine_type` label is a role (TensorRT-LLM's is the engine's name)
_ENGINE_TYPE_IS_ROLE = frozenset({"sglang"})
#: the engine types whose series may carry a role label at all
_LABELLED_ENGINES = frozenset({"sglang", "trtllm"})


def normalized(word: str) -> str | None:
    """The role a configuration value, pod label or engine label value means; None if none."""
    return ROLE_WORDS.get(word.strip().lower())


@dataclass(frozen=True)
class Role:
    role: str = UNIFIED
    #: configuration, kubernetes, engine_label, launch_config, inferred; "" while nothing said
    source: str = ""


def from_labels(engine_type: str, parsed: ParsedSamples) -> Role | None:
    """The role the engine's own series carry, if they carry one (SGLang and TensorRT-LLM do)."""
    if engine_type not in _LABELLED_ENGINES:
        return None
    for series in parsed.values():
        for key in series:
            for label, value in key:
                if label in ROLE_LABELS and (label != "engine_type" or engine_type in _ENGINE_TYPE_IS_ROLE):
                    role = normalized(value)
                    if role is not None:
                        return Role(role, "engine_label")
    return None


class RoleTracker:
    """One engine's role, from its target's declared role, its labels and the series that move."""

    def __init__(self, declared: str | None, declared_source: str, window_seconds: float) -> None:
        role = normalized(declared) if declared else None
        self._declared = Role(role, declared_source) if role else None
        self._window = DeltaWindow(window_seconds)
        self._inferred: Role | None = None
        self.role = self._declared or Role()

    def update(
        self,
        engine_type: str,
        parsed: ParsedSamples,
        readings: Iterable[EngineReading],
        transfers: Iterable[KvTransferReading],
        now: float,
    ) -> Role:
        if self._declared is not None:
            self.role = self._declared
            return self.role
        labelled = from_labels(engine_type, parsed)
        if labelled is not None:
            self.role = labelled
            return self.role
        transfers = list(transfers)
        inferred = self._infer(list(readings), transfers, now)
        if inferred is not None:
            self._inferred = inferred
        consumer = engine_type == "vllm" and bool(parsed.get(FETCH_BY_STAGE))
        if self._inferred is None and engine_type == "vllm" and not consumer and self._hands_over(transfers):
            self._inferred = Role("prefill", "launch_config")
        self.role = self._inferred or Role()
        return self.role

    @staticmethod
    def _hands_over(transfers: Iterable[KvTransferReading]) -> bool:
        return any(t.connector in HAND_OVER_CONNECTORS for t in transfers)

    def _infer(self, readings: list[EngineReading], transfers: list[KvTransferReading], now: float) -> Role | None:
        """Decode or prefill from what moved over the window; None when the window says nothing."""
        pending = {side: sum(t.pending.get(side, 0.0) for t in transfers) for side in ("sender", "receiver")}
        counters = (
            sum(t.received_tokens_total or 0.0 for t in transfers),
            sum(t.transfers_total or 0.0 for t in transfers if t.connector in _READ_ON_DECODE),
            sum(t.expired_total or 0.0 for t in transfers),
            sum(h.count for r in readings if (h := r.histograms.get("e2e_request_latency")) is not None),
            sum(r.generation_tokens_total or 0.0 for r in readings),
        )
        self._window.observe(now, counters)
        moved = self._window.total()
        if pending["receiver"] > 0 or (moved and (moved[0] > 0 or moved[1] > 0)):
            return Role("decode", "inferred")
        if pending["sender"] > 0 or (moved and moved[2] > 0):
            return Role("prefill", "inferred")
        # A connector's families with nothing read on this side, and every finished request one
        # token long: the P/D proxy's prefill leg (`max_tokens` 1). Without a connector, one-token
        # requests are a workload (scoring, classification), not a role.
        hands_over = any(t.connector in HAND_OVER_CONNECTORS for t in transfers)
        if moved and hands_over and moved[3] >= ONE_TOKEN_REQUESTS and moved[4] == moved[3]:
            return Role("prefill", "inferred")
        return None


#: finished requests a window must hold before "every one was one token long" says prefill leg
ONE_TOKEN_REQUESTS = 5
#: connectors that move KV between engines (the offloading connector moves it to the host's memory)
HAND_OVER_CONNECTORS = frozenset({"nixl", "mooncake", "lmcache", "sglang", "trtllm", "tent"})
#: connectors whose transfer histograms are observed where the read is driven: the decode side
_READ_ON_DECODE = frozenset({"nixl", "mooncake"})
