"""Build SGLang captures from SGLang's own metric collectors, as its /metrics prints them.

    <python with prometheus_client and msgspec> tests/integration/build_sglang_fixtures.py \\
        --sglang-src DIR [--out tests/fixtures/engines]

DIR is an unpacked SGLang wheel (`pip download sglang==0.5.23 --no-deps`, then unzip): its
`python/sglang/srt/observability/metrics_collector.py` classes `SchedulerMetricsCollector` and
`TokenizerMetricsCollector` are run unchanged, one process per scheduler rank and one for the
tokenizer, each writing its samples to a shared `PROMETHEUS_MULTIPROC_DIR`, and the page is
rendered the way SGLang's HTTP server renders it (`utils/common.py` `add_prometheus_middleware`:
prometheus_client's `MultiProcessCollector` over that directory, then `generate_latest`). So the
names, types, help texts, buckets, label names and their order, the multiprocess gauge modes and
the `pid` label they add are SGLang's. Only what SGLang reads from its running server is stood in
for (`runtime_context`, `server_args`, the disaggregation and forward-mode enums), and the numbers
logged (`SchedulerStats`, finished requests) are chosen here: each capture says which.

Captures (provenance in tests/fixtures/engines/README.md):
- `sglang-0.5.23-hybrid-priority.prom`: one scheduler (tp 1) of a hybrid sliding-window model with
  `--enable-priority-scheduling`, `--enable-lora`, `--enable-mfu-metrics` and
  `--tokenizer-metrics-allowed-custom-labels tenant`;
- `sglang-0.5.23-dp-attention-node0.prom`, `-node1.prom`: DP attention over two nodes (dp 4, tp 8,
  attention tp 2) with `--enable-metrics-for-all-schedulers`: each node's listener shows its four
  schedulers (dp ranks 0-1 on node 0, 2-3 on node 1) and its own tokenizer's requests.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "engines"
MODEL = "google/gemma-3-27b-it"
DP_MODEL = "deepseek-ai/DeepSeek-V3"


def install_stand_ins(src: Path, settings: dict[str, Any]) -> Any:
    """Make `sglang.srt.observability.metrics_collector` importable without the rest of SGLang: its
    packages point at the wheel's directories without running their __init__, and the modules it
    reads a running server from are stood in for."""

    def package(name: str, path: Path | None = None) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__path__ = [str(path)] if path else []
        sys.modules[name] = module
        return module

    package("sglang", src / "sglang")
    package("sglang.srt", src / "sglang" / "srt")
    package("sglang.srt.observability", src / "sglang" / "srt" / "observability")
    utils = package("sglang.srt.utils", src / "sglang" / "srt" / "utils")
    utils.get_bool_env_var = lambda name, default="false": os.environ.get(name, default).lower() in ("1", "true")  # type: ignore[attr-defined]
    nvtx = types.ModuleType("sglang.srt.utils.nvtx_utils")
    nvtx.__getattr__ = lambda name: lambda *a, **k: lambda f: f  # type: ignore[attr-defined]
    sys.modules["sglang.srt.utils.nvtx_utils"] = nvtx

    class DisaggregationMode(enum.Enum):
        NULL = "null"
        PREFILL = "prefill"
        DECODE = "decode"

        @staticmethod
        def to_engine_type(mode: str) -> str:
            return {"prefill": "prefill", "decode": "decode"}.get(mode, "unified")

    disagg = types.ModuleType("sglang.srt.disaggregation.utils")
    disagg.DisaggregationMode = DisaggregationMode  # type: ignore[attr-defined]
    sys.modules["sglang.srt.disaggregation"] = types.ModuleType("sglang.srt.disaggregation")
    sys.modules["sglang.srt.disaggregation.utils"] = disagg
    forward = types.ModuleType("sglang.srt.model_executor.forward_batch_info")
    forward.ForwardMode = type("ForwardMode", (), {})  # type: ignore[attr-defined]
    sys.modules["sglang.srt.model_executor"] = types.ModuleType("sglang.srt.model_executor")
    sys.modules["sglang.srt.model_executor.forward_batch_info"] = forward
    server_args = types.ModuleType("sglang.srt.server_args")
    server_args.ServerArgs = type("ServerArgs", (), {})  # type: ignore[attr-defined]
    sys.modules["sglang.srt.server_args"] = server_args

    context = types.ModuleType("sglang.srt.runtime_context")
    observability = types.SimpleNamespace(
        enable_metrics=True,
        enable_metrics_for_all_schedulers=settings.get("all_schedulers", False),
        kv_events_config=None,
        extra_metric_labels=None,
        tokenizer_metrics_allowed_custom_labels=settings.get("custom_labels"),
        prompt_tokens_buckets=None,
        generation_tokens_buckets=None,
        stat_loggers=None,
    )
    schedule = types.SimpleNamespace(
        enable_priority_scheduling=settings.get("priority", False),
        prefill_delayer_max_delay_passes=0,
        prefill_delayer_forward_passes_buckets=None,
        prefill_delayer_wait_seconds_buckets=None,
    )
    serving = types.SimpleNamespace(served_model_name=settings["model"], enable_streaming_session=False)
    disagg_settings = types.SimpleNamespace(disaggregation_mode="null", enable_pd_role_switch=False)
    parallel = types.SimpleNamespace(**settings.get("parallel", {}))
    context.get_observability = lambda: observability  # type: ignore[attr-defined]
    context.get_schedule = lambda: schedule  # type: ignore[attr-defined]
    context.get_serving = lambda: serving  # type: ignore[attr-defined]
    context.get_disagg = lambda: disagg_settings  # type: ignore[attr-defined]
    context.get_parallel = lambda: parallel  # type: ignore[attr-defined]
    published = types.SimpleNamespace(is_config_namespace_published=lambda name: False)
    context.get_context = lambda: published  # type: ignore[attr-defined]
    context.exports_expert_balancedness_to_prometheus = lambda: False  # type: ignore[attr-defined]
    sys.modules["sglang.srt.runtime_context"] = context
    return importlib.import_module("sglang.srt.observability.metrics_collector")


def run_scheduler(collectors: Any, role: dict[str, Any]) -> None:
    """One scheduler rank: its collector made as Scheduler does (`init_new`), its stats logged."""
    context = collectors.SchedulerMetricsCollector.init_new(
        server_args=None,
        enable_priority_scheduling=role.get("priority", False),
        enable_lora=role.get("lora", False),
        enable_hierarchical_cache=False,
    )
    collector = context.collector
    stats = collectors.SchedulerStats()
    for key, value in role["stats"].items():
        if isinstance(value, dict):  # a QueueCount: {"total": n, "by_priority": {...}}
            by_priority = {int(k): v for k, v in value["by_priority"].items()} if value.get("by_priority") else None
            value = collectors.QueueCount(total=value["total"], by_priority=by_priority)
        setattr(stats, key, value)
    collector.log_stats(stats)
    if "retracted" in role:
        collector.increment_retracted_reqs(*role["retracted"])
    if "perf" in role:
        collector.increment_estimated_perf(*role["perf"])


def run_tokenizer(collectors: Any, role: dict[str, Any]) -> None:
    """The tokenizer: every finished request observed as TokenizerManager.collect_metrics does."""
    labels = collectors.tokenizer_metric_labels()
    collector = collectors.TokenizerMetricsCollector(labels=labels)
    for request in role["requests"]:
        request_labels = {**labels, **request.get("labels", {})}
        collector.observe_time_to_first_token(request_labels, request["ttft"], stream=True)
        collector.observe_inter_token_latency(request_labels, request["itl"] * request["tokens"], request["tokens"])
        collector.observe_one_finished_request(
            request_labels,
            prompt_tokens=request["prompt"],
            generation_tokens=request["tokens"],
            cached_tokens=request["cached"],
            e2e_latency=request["e2e"],
            has_grammar=False,
            cached_tokens_details={"device": request["cached"]} if request["cached"] else None,
            is_streaming=True,
            time_per_output_token=request["itl"],
        )


def child(src: str, role_json: str) -> None:
    role = json.loads(role_json)
    collectors = install_stand_ins(Path(src), role["settings"])
    (run_tokenizer if role["kind"] == "tokenizer" else run_scheduler)(collectors, role)


def render(directory: str) -> bytes:
    """The page SGLang's HTTP server serves over a multiprocess directory."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    from prometheus_client import CollectorRegistry, generate_latest, multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    return generate_latest(registry)


def build(src: Path, roles: list[dict[str, Any]]) -> bytes:
    with tempfile.TemporaryDirectory() as directory:
        for role in roles:
            env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": directory}
            subprocess.run(
                [sys.executable, __file__, "--child", str(src), json.dumps(role)], env=env, check=True, timeout=120
            )
        return render(directory)


def requests_of(count: int, labels: list[dict[str, str]], ttft: list[float], seed: int) -> list[dict[str, Any]]:
    """`count` finished requests cycling through `labels` and `ttft` (one per label set)."""
    out = []
    for i in range(count):
        k = i % len(labels)
        tokens = 64 + (i * 37 + seed) % 192
        out.append(
            {
                "labels": labels[k],
                "ttft": ttft[k] * (1 + (i % 5) / 10),
                "itl": 0.018 + 0.004 * (i % 3),
                "tokens": tokens,
                "prompt": 900 + (i * 53) % 600,
                "cached": 512 if i % 2 else 0,
                "e2e": ttft[k] + tokens * 0.02,
            }
        )
    return out


def hybrid_priority() -> list[dict[str, Any]]:
    settings = {
        "model": MODEL,
        "priority": True,
        "custom_labels": ["tenant"],
        "parallel": {
            "tp_rank": 0,
            "pp_rank": 0,
            "moe_ep_rank": 0,
            "dp_rank": None,
            "attn_tp_rank": 0,
            "attn_cp_rank": 0,
        },
    }
    stats = {
        "num_running_reqs": {"total": 12, "by_priority": {"0": 9, "1": 3}},
        "num_queue_reqs": {"total": 7, "by_priority": {"0": 2, "1": 5}},
        # The sliding-window pool is the fuller one: token_usage is its usage (SGLang's max).
        "token_usage": 0.93,
        "full_token_usage": 0.41,
        "swa_token_usage": 0.93,
        "mamba_usage": 0.0,
        "kv_used_tokens": 26870,
        "kv_available_tokens": 38666,
        "swa_used_tokens": 7620,
        "swa_available_tokens": 574,
        "num_used_tokens": 26870,
        "lora_pool_slots_used": 3,
        "lora_pool_slots_total": 4,
        "lora_pool_utilization": 0.75,
        "cache_hit_rate": 0.0,  # the decode logger's reset: never the hit ratio
        "gen_throughput": 612.5,
    }
    tenants = [{"tenant": "team-a", "priority": "0"}, {"tenant": "team-b", "priority": "1"}]
    scheduler = {
        "kind": "scheduler",
        "settings": settings,
        "priority": True,
        "lora": True,
        "stats": stats,
        "retracted": (4, 5200, 310),
        "perf": (3.1e15, 1.9e12, 4.0e10),
    }
    tokenizer = {"kind": "tokenizer", "settings": settings, "requests": requests_of(60, tenants, [0.18, 0.9], 1)}
    return [scheduler, tokenizer]


def dp_attention(node: int) -> list[dict[str, Any]]:
    roles: list[dict[str, Any]] = []
    for local in range(4):
        tp_rank = node * 4 + local
        dp_rank = tp_rank // 2
        settings = {
            "model": DP_MODEL,
            "all_schedulers": True,
            "parallel": {
                "tp_rank": tp_rank,
                "pp_rank": 0,
                "moe_ep_rank": tp_rank,
                "dp_rank": dp_rank,
                "attn_tp_rank": tp_rank % 2,
                "attn_cp_rank": 0,
            },
        }
        running, waiting, usage = [(9, 0, 0.52), (11, 2, 0.61), (8, 0, 0.47), (14, 6, 0.88)][dp_rank]
        stats = {
            "num_running_reqs": {"total": running},
            "num_queue_reqs": {"total": waiting},
            "token_usage": usage,
            "full_token_usage": usage,
            "kv_used_tokens": int(usage * 100000),
            "kv_available_tokens": int((1 - usage) * 100000),
            "gen_throughput": 210.0 + 10 * dp_rank,
        }
        roles.append(
            {"kind": "scheduler", "settings": settings, "stats": stats, "retracted": (dp_rank, 100 * dp_rank, 0)}
        )
    tokenizer_settings = {**roles[0]["settings"]}
    count = 40 if node == 0 else 30
    roles.append(
        {"kind": "tokenizer", "settings": tokenizer_settings, "requests": requests_of(count, [{}], [0.35], node)}
    )
    return roles


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        child(argv[1], argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sglang-src", type=Path, required=True, help="an unpacked SGLang wheel")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    args = parser.parse_args(argv)
    captures = {
        "sglang-0.5.23-hybrid-priority.prom": hybrid_priority(),
        "sglang-0.5.23-dp-attention-node0.prom": dp_attention(0),
        "sglang-0.5.23-dp-attention-node1.prom": dp_attention(1),
    }
    for name, roles in captures.items():
        body = build(args.sglang_src, roles)
        (args.out / name).write_bytes(body)
        lines = body.count(b"\n")
        print(f"{name}: {len(body):,} bytes, {lines:,} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
