"""Capture real HAProxy and LiteLLM /metrics in front of the real vLLM CPU engine, for the
mapping unit tests (tests/fixtures/gateways/README.md says which file came from where).

Run: python tests/integration/capture_gateway_fixtures.py (needs .cache/vllm-venv and
.cache/litellm-venv, see vllm_env.py and litellm_env.py).
"""

from __future__ import annotations

import concurrent.futures
import sys
import time

import requests

from tests.integration.gateway_procs import Haproxy, Litellm
from tests.integration.litellm_env import ensure_litellm_venv
from tests.integration.vllm_server import SERVED_MODEL_NAME, VllmServer
from tests.support import FIXTURES


def _traffic(base_url: str, count: int, headers: dict[str, str] | None = None) -> None:
    def one(i: int) -> None:
        _ = requests.post(
            base_url + "/v1/completions",
            json={"model": SERVED_MODEL_NAME, "prompt": "hello " * 8, "max_tokens": 8, "stream": i % 2 == 0},
            headers=headers,
            timeout=60,
        ).content
        requests.post(base_url + "/v1/completions", json={"model": "nope", "prompt": "x"}, headers=headers, timeout=60)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(count)))


def main(which: list[str]) -> int:
    """Capture the gateways named (haproxy, litellm; both by default)."""
    out = FIXTURES / "gateways"
    with VllmServer(startup_timeout_s=900) as engine:
        if "haproxy" in which:
            haproxy = Haproxy(engine.port)
            try:
                _traffic(haproxy.base_url, 8)
                (out / "haproxy-2.6.txt").write_text(requests.get(haproxy.metrics_url, timeout=10).text)
            finally:
                haproxy.close()
        if "litellm" in which:
            litellm = Litellm(ensure_litellm_venv(), engine.base_url, SERVED_MODEL_NAME)
            try:
                _traffic(litellm.base_url, 8, litellm.headers)
                started = time.monotonic()
                metrics = requests.get(litellm.metrics_url, headers=litellm.headers, timeout=120)
                print(f"litellm /metrics answered in {time.monotonic() - started:.1f}s")
                metrics.raise_for_status()
                (out / "litellm-1.108.txt").write_text(metrics.text)
            finally:
                litellm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["haproxy", "litellm"]))
