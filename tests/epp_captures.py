"""Endpoint-picker `/metrics` bodies at their real size, as the EPP's Go Prometheus client prints them.

What an EPP serves: the controller-runtime registry, so the Go runtime and process collectors,
controller-runtime's reconcile, workqueue, REST-client, leader-election and certwatcher families,
then the EPP's own, all sorted by family name as `Registry.Gather` sorts them; labels sorted by
name, a bucket's `le` after them, numbers as Go's `strconv.FormatFloat(f, 'g', -1, 64)` writes
them. Names, types, help texts, label names and buckets are the upstream code's
(tests/fixtures/gateways/README.md names the commits and files); the values are a deterministic
day of traffic written for the tests. `llm_d_router()` is llm-d's EPP (llm-d/llm-d-router, every
request family written twice: `llm_d_epp_*` and its deprecated twin); `inference_extension()` the
Gateway API Inference Extension's EPP before the move (its `inference_objective_*` names only).

    python -m tests.epp_captures   # rewrites the two captures under tests/fixtures/gateways
"""

# ruff: noqa: E501  (help texts are the upstream code's, verbatim: one per line, as they appear there)

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

GATEWAY_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gateways"
LLM_D_CAPTURE = GATEWAY_FIXTURES / "epp-llm-d-router-full.txt"
GAIE_CAPTURE = GATEWAY_FIXTURES / "epp-inference-extension-full.txt"
ALPHA = "[ALPHA] "

# --- the traffic: (model_name, target_model_name, fairness_id, priority) -> requests, and errors by code
TRAFFIC = {
    ("llama-3-8b", "llama-3-8b", "team-search", "0"): 18_240,
    ("llama-3-8b", "llama-3-8b-sql-lora", "team-chat", "0"): 2_044,
    ("qwen-2.5-7b", "qwen-2.5-7b", "", "1"): 5_502,
}
ERRORS = {
    ("llama-3-8b", "llama-3-8b", "team-search", "0"): {"ResourceExhausted": 212, "ServiceUnavailable": 31},
    ("llama-3-8b", "llama-3-8b-sql-lora", "team-chat", "0"): {"ModelServerError": 17, "Internal": 3},
    ("qwen-2.5-7b", "qwen-2.5-7b", "", "1"): {"BadRequest": 44, "ResourceExhausted": 9},
}
STREAMED_SHARE = 0.75
POOL = "vllm-llama-3-8b"
ENDPOINTS = ("vllm-llama-3-8b-0", "vllm-llama-3-8b-1", "vllm-llama-3-8b-2", "vllm-llama-3-8b-3")
CONTROLLERS = ("inferencemodelrewrite", "inferenceobjective", "inferencepool", "pod")

GENERAL_LATENCY = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30)
GENERAL_LATENCY += (45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600)
TTFT_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45)
TTFT_BUCKETS += (60, 120)
SCHEDULER = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
REQUEST_BYTES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576)
REQUEST_BYTES += (2097152, 4194304, 8388608, 16777216, 33554432, 67108864, 134217728, 268435456, 536870912, 1073741824)
RESPONSE_BYTES = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536)
TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536, 131072, 262144, 524288)
TOKENS += (1048576,)
OUTPUT_TOKENS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
NTPOT = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
RECONCILE = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
RECONCILE += (1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60)
WORKQUEUE = tuple(10e-9 * 10**i for i in range(12))  # prometheus.ExponentialBuckets(10e-9, 10, 12)
REST_LATENCY = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
REST_BYTES = (64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
PLUGINS = (  # (extension_point, plugin_type, plugin_name): llm-d's deploy/config/epp-config.yaml, and its data producers
    ("Filter", "decode-filter", "decode-filter"),
    ("Picker", "max-score-picker", "max-score-picker"),
    ("PrepareData", "prefix-cache-producer", "prefix-cache-producer"),
    ("PreRequest", "prefix-cache-producer", "prefix-cache-producer"),
    ("ProfilePicker", "single-profile-handler", "single-profile-handler"),
    ("Scorer", "prefix-cache-scorer", "prefix-cache-scorer"),
)


def go_float(value: float) -> str:
    """`value` as Go's expfmt writes it: 1, 0, -1, NaN and ±Inf spelled out, else the shortest
    digits in %e form when the exponent is below -4 or 6 and above, %f form otherwise."""
    if value in (0, 1, -1):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    assert isinstance(exponent, int)
    point = len(text) + exponent  # where the decimal point goes in `text`
    e = point - 1
    if e < -4 or e >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        out = f"{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    elif point >= len(text):
        out = text + "0" * (point - len(text))
    else:
        out = text[:point] + "." + text[point:]
    return ("-" if sign else "") + out


@dataclass
class Family:
    name: str
    type: str
    help: str
    #: (labels, value) for counters and gauges; (labels, bounds, cumulative counts, sum) for
    #: histograms; (labels, quantiles, count, sum) for summaries
    series: list[tuple] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.type}"]
        for entry in self.series:
            labels = entry[0]
            if self.type == "histogram":
                _, bounds, counts, total = entry
                for bound, count in zip((*bounds, math.inf), counts):
                    lines.append(f"{self.name}_bucket{_labels(labels, ('le', go_float(bound)))} {go_float(count)}")
                lines.append(f"{self.name}_sum{_labels(labels)} {go_float(total)}")
                lines.append(f"{self.name}_count{_labels(labels)} {go_float(counts[-1])}")
            elif self.type == "summary":
                _, quantiles, count, total = entry
                for q, v in quantiles:
                    lines.append(f"{self.name}{_labels(labels, ('quantile', go_float(q)))} {go_float(v)}")
                lines.append(f"{self.name}_sum{_labels(labels)} {go_float(total)}")
                lines.append(f"{self.name}_count{_labels(labels)} {go_float(count)}")
            else:
                lines.append(f"{self.name}{_labels(labels)} {go_float(entry[1])}")
        return "\n".join(lines) + "\n"


def _labels(labels: dict[str, str], extra: tuple[str, str] | None = None) -> str:
    pairs = [f'{k}="{v}"' for k, v in sorted(labels.items())]
    if extra is not None:
        pairs.append(f'{extra[0]}="{extra[1]}"')
    return "{" + ",".join(pairs) + "}" if pairs else ""


def histogram(count: float, bounds: tuple[float, ...], median: float, spread: float = 2.5) -> tuple:
    """(bounds, cumulative counts with +Inf, sum) of `count` observations spread log-normally
    around `median` (whole observations: each bucket's count an integer)."""
    counts = []
    for bound in bounds:
        share = 0.5 * (1 + math.erf(math.log(bound / median) / (math.log(spread) * math.sqrt(2)))) if bound > 0 else 0
        counts.append(float(math.floor(count * share)))
    counts.append(float(count))
    return bounds, counts, round(count * median * 1.18, 6)


def _help(text: str, deprecated_for: str | None = None) -> str:
    return ALPHA + (f"[Deprecated: Use {deprecated_for}] " if deprecated_for else "") + text


def runtime_families(seed: int) -> list[Family]:
    """The Go runtime and process collectors (client_golang's defaults)."""
    memstats = {
        "alloc_bytes": (
            "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.",
            4.1928456e7,
        ),
        "alloc_bytes_total": (
            "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.",
            9.8134552112e10,
        ),
        "buck_hash_sys_bytes": (
            "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.",
            1.701327e6,
        ),
        "frees_total": (
            "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.",
            1.123901122e9,
        ),
        "gc_sys_bytes": (
            "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.",
            5.12888e6,
        ),
        "heap_alloc_bytes": (
            "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.",
            4.1928456e7,
        ),
        "heap_idle_bytes": (
            "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.",
            2.3715840e7,
        ),
        "heap_inuse_bytes": (
            "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes",
            4.5908736e7,
        ),
        "heap_objects": ("Number of currently allocated objects. Equals to /gc/heap/objects:objects.", 231558),
        "heap_released_bytes": (
            "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.",
            1.4811136e7,
        ),
        "heap_sys_bytes": (
            "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.",
            6.9624576e7,
        ),
        "last_gc_time_seconds": ("Number of seconds since 1970 of last garbage collection.", 1.7872152014472296e9),
        "mallocs_total": (
            "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.",
            1.12413268e9,
        ),
        "mcache_inuse_bytes": (
            "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.",
            19328,
        ),
        "mcache_sys_bytes": (
            "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.",
            31200,
        ),
        "mspan_inuse_bytes": (
            "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.",
            829440,
        ),
        "mspan_sys_bytes": (
            "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.",
            1.04448e6,
        ),
        "next_gc_bytes": (
            "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.",
            6.8157424e7,
        ),
        "other_sys_bytes": (
            "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.",
            2.633865e6,
        ),
        "stack_inuse_bytes": (
            "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.",
            3.440640e6,
        ),
        "stack_sys_bytes": (
            "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.",
            3.440640e6,
        ),
        "sys_bytes": ("Number of bytes obtained from system. Equals to /memory/classes/total:byte.", 8.3892488e7),
    }
    types = {"alloc_bytes_total": "counter", "frees_total": "counter", "mallocs_total": "counter"}
    families = [
        Family(
            "go_gc_duration_seconds",
            "summary",
            "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.",
            [
                (
                    {},
                    ((0, 3.1e-05), (0.25, 6.0812e-05), (0.5, 7.9941e-05), (0.75, 0.000112774), (1, 0.004177201)),
                    19021 + seed,
                    1.935728411,
                )
            ],
        ),
        Family(
            "go_gc_gogc_percent",
            "gauge",
            "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.",
            [({}, 100)],
        ),
        Family(
            "go_gc_gomemlimit_bytes",
            "gauge",
            "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.",
            [({}, 9.223372036854776e18)],
        ),
        Family("go_goroutines", "gauge", "Number of goroutines that currently exist.", [({}, 318)]),
        Family("go_info", "gauge", "Information about the Go environment.", [({"version": "go1.25.3"}, 1)]),
        Family(
            "go_sched_gomaxprocs_threads",
            "gauge",
            "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.",
            [({}, 4)],
        ),
        Family("go_threads", "gauge", "Number of OS threads created.", [({}, 14)]),
    ]
    families += [
        Family(f"go_memstats_{name}", types.get(name, "gauge"), help_text, [({}, value)])
        for name, (help_text, value) in memstats.items()
    ]
    families += [
        Family(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", [({}, 8113.37)]
        ),
        Family("process_max_fds", "gauge", "Maximum number of open file descriptors.", [({}, 1.048576e6)]),
        Family(
            "process_network_receive_bytes_total",
            "counter",
            "Number of bytes received by the process over the network.",
            [({}, 1.1482339612e10)],
        ),
        Family(
            "process_network_transmit_bytes_total",
            "counter",
            "Number of bytes sent by the process over the network.",
            [({}, 1.0371025529e10)],
        ),
        Family("process_open_fds", "gauge", "Number of open file descriptors.", [({}, 41)]),
        Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", [({}, 1.09658112e8)]),
        Family(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            [({}, 1.78712874e9)],
        ),
        Family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", [({}, 1.401487360e9)]),
        Family(
            "process_virtual_memory_max_bytes",
            "gauge",
            "Maximum amount of virtual memory available in bytes.",
            [({}, 1.8446744073709552e19)],
        ),
    ]
    return families


def controller_runtime_families() -> list[Family]:
    """controller-runtime's registry: reconciles, workqueues, the REST client, leader election, certwatcher."""
    reconciles = {"inferencemodelrewrite": 12, "inferenceobjective": 31, "inferencepool": 86, "pod": 1_942}
    fams = [
        Family(
            "certwatcher_read_certificate_errors_total", "counter", "Total number of certificate read errors", [({}, 0)]
        ),
        Family("certwatcher_read_certificate_total", "counter", "Total number of certificate reads", [({}, 3)]),
        Family(
            "controller_runtime_active_workers",
            "gauge",
            "Number of currently used workers per controller",
            [({"controller": c}, 0) for c in CONTROLLERS],
        ),
        Family(
            "controller_runtime_max_concurrent_reconciles",
            "gauge",
            "Maximum number of concurrent reconciles per controller",
            [({"controller": c}, 1) for c in CONTROLLERS],
        ),
        Family(
            "controller_runtime_reconcile_errors_total",
            "counter",
            "Total number of reconciliation errors per controller",
            [({"controller": c}, 0) for c in CONTROLLERS],
        ),
        Family(
            "controller_runtime_reconcile_panics_total",
            "counter",
            "Total number of reconciliation panics per controller",
            [({"controller": c}, 0) for c in CONTROLLERS],
        ),
        Family(
            "controller_runtime_reconcile_time_seconds",
            "histogram",
            "Length of time per reconciliation per controller",
            [({"controller": c}, *histogram(n, RECONCILE, 0.0004, 3.0)) for c, n in reconciles.items()],
        ),
        Family(
            "controller_runtime_reconcile_timeouts_total",
            "counter",
            "Total number of reconciliation timeouts per controller",
            [({"controller": c}, 0) for c in CONTROLLERS],
        ),
        Family(
            "controller_runtime_reconcile_total",
            "counter",
            "Total number of reconciliations per controller",
            [
                ({"controller": c, "result": r}, n if r == "success" else 0)
                for c, n in reconciles.items()
                for r in ("error", "requeue", "requeue_after", "success")
            ],
        ),
        Family(
            "controller_runtime_terminal_reconcile_errors_total",
            "counter",
            "Total number of terminal reconciliation errors per controller",
            [({"controller": c}, 0) for c in CONTROLLERS],
        ),
        Family(
            "leader_election_master_status",
            "gauge",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            [({"name": "epp-vllm-llama-3-8b.llm-d.ai"}, 1)],
        ),
    ]
    verbs = {"GET": 118, "LIST": 9, "PATCH": 4, "PUT": 7_410, "WATCH": 46}
    host = "10.96.0.1:443"
    fams += [
        Family(
            "rest_client_rate_limiter_duration_seconds",
            "histogram",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            [({"host": host, "verb": v}, *histogram(n, REST_LATENCY, 2e-06)) for v, n in verbs.items()],
        ),
        Family(
            "rest_client_request_duration_seconds",
            "histogram",
            "Request latency in seconds. Broken down by verb and host.",
            [({"host": host, "verb": v}, *histogram(n, REST_LATENCY, 0.004)) for v, n in verbs.items()],
        ),
        Family(
            "rest_client_request_retries_total",
            "counter",
            "Number of request retries, partitioned by status code, verb, and host.",
            [],
        ),
        Family(
            "rest_client_request_size_bytes",
            "histogram",
            "Request size in bytes. Broken down by verb and host.",
            [({"host": host, "verb": v}, *histogram(n, REST_BYTES, 300)) for v, n in verbs.items()],
        ),
        Family(
            "rest_client_requests_total",
            "counter",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            [({"code": "200", "host": host, "method": v}, n) for v, n in verbs.items()]
            + [({"code": "409", "host": host, "method": "PUT"}, 3)],
        ),
        Family(
            "rest_client_response_size_bytes",
            "histogram",
            "Response size in bytes. Broken down by verb and host.",
            [({"host": host, "verb": v}, *histogram(n, REST_BYTES, 2400)) for v, n in verbs.items()],
        ),
    ]
    queue = {c: {"name": c, "controller": c} for c in CONTROLLERS}
    fams += [
        Family(
            "workqueue_adds_total",
            "counter",
            "Total number of adds handled by workqueue",
            [(q, reconciles[c]) for c, q in queue.items()],
        ),
        Family(
            "workqueue_depth",
            "gauge",
            "Current depth of workqueue by workqueue and priority",
            [({**q, "priority": ""}, 0) for q in queue.values()],
        ),
        Family(
            "workqueue_longest_running_processor_seconds",
            "gauge",
            "How many seconds has the longest running processor for workqueue been running.",
            [(q, 0) for q in queue.values()],
        ),
        Family(
            "workqueue_queue_duration_seconds",
            "histogram",
            "How long in seconds an item stays in workqueue before being requested",
            [(q, *histogram(reconciles[c], WORKQUEUE, 3e-05, 4.0)) for c, q in queue.items()],
        ),
        Family(
            "workqueue_retries_total",
            "counter",
            "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
            [(q, 0) for q in queue.values()],
        ),
        Family(
            "workqueue_unfinished_work_seconds",
            "gauge",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            [(q, 0) for q in queue.values()],
        ),
        Family(
            "workqueue_work_duration_seconds",
            "histogram",
            "How long in seconds processing an item from workqueue takes.",
            [(q, *histogram(reconciles[c], WORKQUEUE, 0.0004, 3.0)) for c, q in queue.items()],
        ),
    ]
    return fams


def _by(keys: tuple[str, ...], source: dict[tuple[str, str, str, str], float]) -> dict[tuple, float]:
    """The traffic summed over the request labels not in `keys` (what a vector without them counts)."""
    index = {"model_name": 0, "target_model_name": 1, "fairness_id": 2, "priority": 3}
    out: dict[tuple, float] = {}
    for key, value in source.items():
        reduced = tuple(key[index[k]] for k in keys)
        out[reduced] = out.get(reduced, 0) + value
    return out


def request_families(names: dict[str, str], helps: dict[str, str], keys: dict[str, tuple[str, ...]]) -> list[Family]:
    """The request path's families under one naming: `names` maps a kind to its family name,
    `keys` to the request labels that family carries (the other labels summed away, as a vector
    without them counts)."""
    requests = {kind: _by(keys[kind], TRAFFIC) for kind in names}
    errors: dict[tuple, float] = {}
    for key, codes in ERRORS.items():
        for code, n in codes.items():
            for reduced, value in _by(keys["errors"], {key: n}).items():
                errors[(*reduced, code)] = errors.get((*reduced, code), 0) + value

    def series(kind: str, bounds: tuple[float, ...], median: float, share: float = 1.0) -> list[tuple]:
        return [
            (dict(zip(keys[kind], k)), *histogram(math.floor(v * share), bounds, median))
            for k, v in sorted(requests[kind].items())
        ]

    out = [
        Family(
            names["requests"],
            "counter",
            helps["requests"],
            [(dict(zip(keys["requests"], k)), v) for k, v in sorted(requests["requests"].items())],
        ),
        Family(
            names["errors"],
            "counter",
            helps["errors"],
            [({**dict(zip(keys["errors"], k[:-1])), "error_code": k[-1]}, v) for k, v in sorted(errors.items())],
        ),
        Family(names["duration"], "histogram", helps["duration"], series("duration", GENERAL_LATENCY, 2.2)),
        Family(
            names["request_bytes"], "histogram", helps["request_bytes"], series("request_bytes", REQUEST_BYTES, 3100)
        ),
        Family(
            names["response_bytes"],
            "histogram",
            helps["response_bytes"],
            series("response_bytes", RESPONSE_BYTES, 1900),
        ),
        Family(names["input_tokens"], "histogram", helps["input_tokens"], series("input_tokens", TOKENS, 780)),
        Family(
            names["output_tokens"], "histogram", helps["output_tokens"], series("output_tokens", OUTPUT_TOKENS, 220)
        ),
        Family(names["cached_tokens"], "histogram", helps["cached_tokens"], series("cached_tokens", TOKENS, 512, 0.6)),
        Family(names["ntpot"], "histogram", helps["ntpot"], series("ntpot", NTPOT, 0.011)),
        Family(
            names["running"],
            "gauge",
            helps["running"],
            [(dict(zip(keys["running"], k)), 1) for k in sorted(requests["running"])],
        ),
    ]
    if "ttft" in names:
        ttft = []
        for k, v in sorted(requests["ttft"].items()):
            streamed = math.floor(v * STREAMED_SHARE)
            labels = dict(zip(keys["ttft"], k))
            ttft.append(({**labels, "streaming": "false"}, *histogram(v - streamed, TTFT_BUCKETS, 2.2)))
            ttft.append(({**labels, "streaming": "true"}, *histogram(streamed, TTFT_BUCKETS, 0.31)))
        out.append(Family(names["ttft"], "histogram", helps["ttft"], ttft))
    return out


def epp_families(prefix: str, deprecated_for: str | None) -> list[Family]:
    """The pool, scheduler, plugin, processing and info families under `prefix`
    (`llm_d_epp` or the older `inference_pool`/`inference_extension` pair)."""
    pool_prefix, ext_prefix = (prefix, prefix) if prefix == "llm_d_epp" else ("inference_pool", "inference_extension")

    def h(text: str, new: str) -> str:
        return _help(text, f"{deprecated_for}_{new}" if deprecated_for else None)

    total = sum(TRAFFIC.values())
    attempts = [
        (
            {
                "status": "success",
                "target_model_name": t,
                ("endpoint_name" if prefix == "llm_d_epp" else "pod_name"): e,
                "namespace": "llm-d",
                "port": "8000",
            },
            n // len(ENDPOINTS),
        )
        for (m, t), n in sorted(_by(("model_name", "target_model_name"), TRAFFIC).items())
        for e in ENDPOINTS
    ]
    ready = "ready_endpoints" if prefix == "llm_d_epp" else "ready_pods"
    return [
        Family(
            f"{pool_prefix}_average_kv_cache_utilization",
            "gauge",
            h("The average kv cache utilization for an inference server pool.", "average_kv_cache_utilization"),
            [({"name": POOL}, 0.4125)],
        ),
        Family(
            f"{pool_prefix}_average_queue_size",
            "gauge",
            h("The average number of requests pending in the model server queue.", "average_queue_size"),
            [({"name": POOL}, 1.25)],
        ),
        Family(
            f"{pool_prefix}_average_running_requests",
            "gauge",
            h("The average number of running requests across model servers in the pool.", "average_running_requests"),
            [({"name": POOL}, 11.5)],
        ),
        Family(
            f"{pool_prefix}_{ready}",
            "gauge",
            h(
                f"The number of ready {'endpoints' if prefix == 'llm_d_epp' else 'pods'} in the inference server pool.",
                "ready_endpoints",
            ),
            [({"name": POOL}, len(ENDPOINTS))],
        ),
        Family(
            f"{ext_prefix}_info",
            "gauge",
            _help("General information of the current build of Inference Extension."),
            [({"build_ref": "v0.6.0", "commit": "ebab6879"}, 1)],
        ),
        Family(
            f"{ext_prefix}_plugin_duration_seconds",
            "histogram",
            h(
                "Plugin processing latency distribution in seconds for each extension point, plugin type and plugin name.",
                "plugin_duration_seconds",
            ),
            [
                ({"extension_point": p, "plugin_type": t, "plugin_name": n}, *histogram(total, SCHEDULER, 4e-05, 3.0))
                for p, t, n in PLUGINS
            ],
        ),
        Family(
            f"{ext_prefix}_scheduler_attempts_total",
            "counter",
            h("Total number of scheduling attempts.", "scheduler_attempts_total"),
            attempts,
        ),
        Family(
            f"{ext_prefix}_scheduler_e2e_duration_seconds",
            "histogram",
            h("End-to-end scheduling latency distribution in seconds.", "scheduler_e2e_duration_seconds"),
            [({}, *histogram(total, SCHEDULER, 0.0003))],
        ),
    ]


LLM_D_KEYS = ("model_name", "target_model_name", "fairness_id", "priority")
OLD_KEYS = {
    "requests": ("model_name", "target_model_name", "priority"),
    "running": ("model_name",),
    **{kind: ("model_name", "target_model_name") for kind in ("errors", "duration", "request_bytes", "response_bytes")},
    **{
        kind: ("model_name", "target_model_name")
        for kind in ("input_tokens", "output_tokens", "cached_tokens", "ntpot")
    },
}
OLD_NAMES = {
    "requests": (
        "request_total",
        "Counter of inference objective requests broken out for each model and target model.",
        "request_total",
    ),
    "errors": (
        "request_error_total",
        "Counter of inference objective requests errors broken out for each model and target model.",
        "request_error_total",
    ),
    "duration": (
        "request_duration_seconds",
        "Inference objective response latency distribution in seconds for each model and target model.",
        "request_duration_seconds",
    ),
    "request_bytes": (
        "request_sizes",
        "Inference objective requests size distribution in bytes for each model and target model.",
        "request_size_bytes",
    ),
    "response_bytes": (
        "response_sizes",
        "Inference objective responses size distribution in bytes for each model and target model.",
        "response_size_bytes",
    ),
    "input_tokens": (
        "input_tokens",
        "Inference objective input token count distribution for requests in each model.",
        "request_input_tokens",
    ),
    "output_tokens": (
        "output_tokens",
        "Inference objective output token count distribution for requests in each model.",
        "request_output_tokens",
    ),
    "cached_tokens": (
        "prompt_cached_tokens",
        "Inference objective prompt cached token count distribution for requests in each model.",
        "request_cached_tokens",
    ),
    "ntpot": (
        "normalized_time_per_output_token_seconds",
        "Inference objective latency divided by number of output tokens in seconds for each model and target model.",
        "request_ntpot_seconds",
    ),
    "running": ("running_requests", "Inference objective number of running requests in each model.", "request_running"),
}
NEW_HELP = {
    "requests": "Total number of processed requests.",
    "errors": "Total number of request errors.",
    "duration": "End-to-end request latency distribution in seconds.",
    "request_bytes": "Incoming request body size distribution in bytes.",
    "response_bytes": "Outgoing response body size distribution in bytes.",
    "input_tokens": "Input token count distribution per request.",
    "output_tokens": "Output token count distribution per request.",
    "cached_tokens": "Distribution of prompt tokens read from cache per request, as reported by the model server in the response.",
    "ntpot": "Normalized time per output token in seconds (end-to-end latency divided by output token count).",
    "running": "Current number of active running requests.",
    "ttft": "Time to first token in seconds, measured from request received to first response byte. For non-streaming requests, this equals total request duration.",
}


def exposition(families: list[Family]) -> str:
    """The body `Registry.Gather` gives: families sorted by name."""
    return "".join(family.text() for family in sorted(families, key=lambda f: f.name))


def old_request_families(deprecated: bool) -> list[Family]:
    names = {kind: f"inference_objective_{name}" for kind, (name, _, _) in OLD_NAMES.items()}
    helps = {
        kind: _help(text, f"llm_d_epp_{new}" if deprecated else None) for kind, (_, text, new) in OLD_NAMES.items()
    }
    return request_families(names, helps, OLD_KEYS)


def llm_d_router() -> str:
    """llm-d's EPP (llm-d/llm-d-router): every family twice, `llm_d_epp_*` and its deprecated twin."""
    new_names = {kind: f"llm_d_epp_{new}" for kind, (_, _, new) in OLD_NAMES.items()} | {
        "ttft": "llm_d_epp_request_ttft_seconds"
    }
    new = request_families(new_names, {k: _help(v) for k, v in NEW_HELP.items()}, {k: LLM_D_KEYS for k in new_names})
    families = runtime_families(0) + controller_runtime_families() + new + old_request_families(True)
    return exposition(families + epp_families("llm_d_epp", None) + epp_families("inference_extension", "llm_d_epp"))


def inference_extension() -> str:
    """The Gateway API Inference Extension's EPP before the move: its own names only."""
    families = runtime_families(1) + controller_runtime_families() + old_request_families(False)
    return exposition(families + epp_families("inference_extension", None))


if __name__ == "__main__":
    LLM_D_CAPTURE.write_text(llm_d_router())
    GAIE_CAPTURE.write_text(inference_extension())
