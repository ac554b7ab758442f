"""Start and stop a real vLLM OpenAI-compatible server on CPU for tests.

The engine runs from the dedicated venv (see vllm_env.py) on the tiny local
Llama (see tiny_model.py). The KV cache is deliberately tiny (48 blocks of 32
tokens) so modest load already causes queueing and preemption, which is what
the exporter's bottleneck diagnosis must see. Every knob is overridable.

The server runs in its own process group (vLLM forks an engine-core process),
so teardown can kill exactly what it started and nothing else. Its caches (vLLM's
and torch inductor's compiled kernels) stay under the repository's .cache/.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import requests

from tests.integration import tiny_model
from tests.integration.vllm_env import CACHE_DIR, TEMP_DIR, ensure_vllm_venv, file_lock, temp_env
from tests.support import REQUEST_BOUND_SECONDS, free_port, log_tail, stop_group, wait_until_serving

SERVED_MODEL_NAME = "tiny-llama"
READY_METRIC = "vllm:num_requests_running"
DEFAULT_SEED = 0
MODEL_BUILD_TIMEOUT_S = 600.0
STOP_GRACE_S = 20.0
LOG_TAIL_LINES = 80
POLL_INTERVAL_S = 0.5
LOG_DIR = CACHE_DIR / "vllm-logs"

DEFAULT_ENGINE_ARGS: Mapping[str, object] = {
    "dtype": "float32",
    "block-size": 32,  # the CPU backend needs a multiple of 32
    "num-gpu-blocks-override": 48,  # 1,536-token KV cache: saturates with a couple dozen requests
    # The overload scenario's largest request (700-token prompt + BOS + 400 output tokens) must
    # fit, or vLLM shrinks max_tokens below min_tokens and answers 400; at most 1,504 (47 blocks).
    "max-model-len": 1152,
    "max-num-seqs": 32,
}
DEFAULT_ENV: Mapping[str, str] = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the block override decides the usable size
    # Compile caches stay in the git-ignored repo cache, not the user's home nor the shared
    # temporary directory, and are reused by the next run. Torch inductor's precompiled headers
    # (300-450 MB) go to tempfile's directory whatever TORCHINDUCTOR_CACHE_DIR says, hence TMPDIR,
    # which also takes vLLM's IPC sockets and scratch files out of /tmp.
    "VLLM_CACHE_ROOT": str(CACHE_DIR / "vllm-home"),
    "TORCHINDUCTOR_CACHE_DIR": str(CACHE_DIR / "vllm-home" / "torchinductor"),
    "TMPDIR": str(TEMP_DIR),
    # Nothing may leave the machine: no hub lookups, no usage reporting.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


class VllmServerError(RuntimeError):
    """The server did not become ready; the message carries the log tail."""


def ensure_tiny_model(python: Path, seed: int = DEFAULT_SEED) -> Path:
    """Build the tiny model with the venv's interpreter unless already built.

    A file lock serialises concurrent builders; the build itself runs in the
    vLLM venv because only that venv has torch and transformers.
    """
    out_dir = tiny_model.default_model_dir(seed)
    if tiny_model.is_built(out_dir, seed):
        return out_dir
    with file_lock(out_dir.with_name(f"{out_dir.name}.lock"), MODEL_BUILD_TIMEOUT_S * 2):
        if not tiny_model.is_built(out_dir, seed):
            _run_model_build(python, out_dir, seed)
    return out_dir


def _run_model_build(python: Path, out_dir: Path, seed: int) -> None:
    cmd = [str(python), tiny_model.__file__, str(out_dir), "--seed", str(seed)]
    try:
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=MODEL_BUILD_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
            env=temp_env(),
        )
    except subprocess.TimeoutExpired as exc:
        raise VllmServerError(f"tiny model build timed out after {MODEL_BUILD_TIMEOUT_S:.0f}s") from exc
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-LOG_TAIL_LINES:])
        raise VllmServerError(f"tiny model build failed (exit {result.returncode}):\n{tail}")


def engine_cli_args(options: Mapping[str, object]) -> list[str]:
    """Render ``{"flag-name": value}`` as CLI args.

    True -> ``--flag``, False -> ``--no-flag`` (vLLM's boolean options accept
    both forms), None -> omitted, anything else -> ``--flag value``.
    """
    args: list[str] = []
    for name, value in options.items():
        if value is None:
            continue
        if value is True:
            args.append(f"--{name}")
        elif value is False:
            args.append(f"--no-{name}")
        else:
            args += [f"--{name}", str(value)]
    return args


def metric_sum(metrics_text: str, name: str) -> float | None:
    """Sum of all samples of exactly ``name`` in a Prometheus text page, None if absent."""
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)", re.MULTILINE)
    values = [float(m.group(1)) for m in pattern.finditer(metrics_text)]
    return sum(values) if values else None


class VllmServer:
    """A real vLLM API server subprocess bound to 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        *,
        seed: int = DEFAULT_SEED,
        model_dir: Path | None = None,
        port: int | None = None,
        engine_args: Mapping[str, object] | None = None,
        enable_prefix_caching: bool | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 600.0,
        log_path: Path | None = None,
    ) -> None:
        """Configure, do not start yet.

        ``engine_args`` entries override DEFAULT_ENGINE_ARGS (None removes one);
        ``enable_prefix_caching`` None keeps vLLM's default.
        """
        self.seed = seed
        self.model_dir = model_dir
        self.port = port if port is not None else free_port()
        self.engine_args = {**DEFAULT_ENGINE_ARGS, **(engine_args or {})}
        if enable_prefix_caching is not None:
            self.engine_args["enable-prefix-caching"] = enable_prefix_caching
        self.extra_args = list(extra_args)
        self.env_overrides = {**DEFAULT_ENV, **(env or {})}
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path or LOG_DIR / f"vllm-{self.port}.log"
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._shared_memory_before: set[str] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.base_url}/metrics"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def command(self, python: Path, model_dir: Path) -> list[str]:
        """Full server command line (the ``vllm`` console script is broken for vllm-cpu)."""
        return [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir),
            "--served-model-name", SERVED_MODEL_NAME,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            *engine_cli_args(self.engine_args),
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> VllmServer:
        """Provision what is missing, launch the server and wait until it is ready."""
        if self._proc is not None:
            raise VllmServerError("server already started")
        python = ensure_vllm_venv()
        model_dir = self.model_dir or ensure_tiny_model(python, self.seed)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        TEMP_DIR.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self._shared_memory_before = shared_memory_blocks()
        with self.log_path.open("ab") as log:
            log.write(f"\n=== starting on port {self.port} at {time.ctime()}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self.command(python, model_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env_overrides},
                start_new_session=True,  # own process group: teardown kills exactly this tree
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self) -> None:
        """SIGTERM the server's process group, then SIGKILL whatever outlives the grace period;
        returns once none of the group is left, so a restart finds the port and memory free."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_group(proc, STOP_GRACE_S)
            remove_orphaned(shared_memory_blocks() - self._shared_memory_before)

    def restart(self) -> VllmServer:
        """Stop and start again on the same port (counters start from zero)."""
        self.stop()
        return self.start()

    def metrics_text(self, timeout_s: float = REQUEST_BOUND_SECONDS) -> str:
        response = requests.get(self.metrics_url, timeout=timeout_s)
        response.raise_for_status()
        return response.text

    def metric(self, name: str) -> float | None:
        """Current sum over all label sets of one metric, None if not exported."""
        return metric_sum(self.metrics_text(), name)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(log_tail(self.log_path, 200 * lines).splitlines()[-lines:])

    def _wait_ready(self) -> None:
        """Poll /health and /metrics until both are up; fail at once if the process dies."""
        assert self._proc is not None
        wait_until_serving(
            self._proc,
            self._is_ready,
            f"vLLM on {self.base_url}",
            self.log_tail,
            self.startup_timeout_s,
            POLL_INTERVAL_S,
        )

    def _is_ready(self) -> bool:
        health = requests.get(f"{self.base_url}/health", timeout=REQUEST_BOUND_SECONDS)
        return health.status_code == 200 and READY_METRIC in self.metrics_text()

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


#: where POSIX shared memory lives: vLLM's multiprocessing blocks (psm_*) and semaphores (sem.mp-*)
SHARED_MEMORY = Path("/dev/shm")


def shared_memory_blocks() -> set[str]:
    return {p.name for pattern in ("psm_*", "sem.mp-*") for p in SHARED_MEMORY.glob(pattern)}


def remove_orphaned(names: set[str]) -> None:
    """Of the shared-memory blocks a server made, remove those no live process maps: a vLLM process
    killed after its grace period leaves its blocks in /dev/shm, hundreds of MB of RAM each, for
    every later run. A block another server (a prefill/decode pair's other half, or a server of a
    second run side by side) still maps stays.

    A block is known by its file, not its name: glibc makes a POSIX semaphore under a temporary
    name, maps it, and only then links it to `sem.mp-*`, so the process that made it maps it as
    `/dev/shm/sem.XXXXXX (deleted)`. Looked for by name, a semaphore that a second run's vLLM had
    just made for a worker not yet started was taken for an orphan and removed, and the worker
    failed to start (FileNotFoundError in SemLock._rebuild)."""
    files = {name: file for name in names if (file := block_file(name)) is not None}
    for maps in Path("/proc").glob("[0-9]*/maps"):
        if not files:
            return
        try:
            text = maps.read_text(errors="replace")
        except OSError:  # a process gone meanwhile, or not ours to read
            continue
        mapped = {mapped_file(line) for line in text.splitlines() if f" {SHARED_MEMORY}/" in line}
        files = {name: file for name, file in files.items() if file not in mapped}
    for name in files:
        (SHARED_MEMORY / name).unlink(missing_ok=True)


def block_file(name: str) -> tuple[int, int] | None:
    """(device, inode) of the /dev/shm block `name`; None once it is gone."""
    try:
        found = (SHARED_MEMORY / name).stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def mapped_file(line: str) -> tuple[int, int]:
    """(device, inode) of a /proc/PID/maps line: `address perms offset major:minor inode path`."""
    fields = line.split(maxsplit=5)
    major, _, minor = fields[3].partition(":")
    return os.makedev(int(major, 16), int(minor, 16)), int(fields[4])
