"""Endpoint-picker `/metrics` bodies at their real size, as the EPP's Go Prometheus client prints them.

What an EPP serves: the controller-runtime registry, so the Go runtime and process collectors,
controller-runtime's reconcile, workqueue, REST-client, leader-election and certwatcher families,
then the EPP's own, all sorted by family name as `Registry.Gather` sorts them; labels sorted by
name, a bucket's `le` after them, numbers as Go's `strconv.FormatFloat(f, 'g', -1, 64)` writes
them. Names, types, label names and buckets are the upstream code's, here; help texts and the
runtime's values in tests/fixtures/gateways/epp-families.json (README.md there names the commits
and files); the request values are a deterministic day of traffic written for the tests.
`llm_d_router()` is llm-d's EPP (every request family twice: `llm_d_epp_*` and its deprecated
twin); `inference_extension()` the Gateway API Inference Extension's before the move.

    python -m tests.epp_captures   # rewrites the two captures under tests/fixtures/gateways
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

GATEWAY_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gateways"
LLM_D_CAPTURE = GATEWAY_FIXTURES / "epp-llm-d-router-full.txt"
GAIE_CAPTURE = GATEWAY_FIXTURES / "epp-inference-extension-full.txt"
FAMILIES = json.loads((GATEWAY_FIXTURES / "epp-families.json").read_text())
HELP: dict[str, str] = FAMILIES["help"]

# --- the traffic: (model_name, target_model_name, fairness_id, priority) -> requests; errors by code
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
ENDPOINTS = tuple(f"vllm-llama-3-8b-{i}" for i in range(4))
RECONCILES = {"inferencemodelrewrite": 12, "inferenceobjective": 31, "inferencepool": 86, "pod": 1_942}
VERBS = {"GET": 118, "LIST": 9, "PATCH": 4, "PUT": 7_410, "WATCH": 46}
API_HOST = "10.96.0.1:443"

# --- buckets, as the code declares them
GENERAL_LATENCY: tuple[float, ...] = (
    0.005,
    0.025,
    0.05,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    1.25,
    1.5,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    15,
    20,
    30,
)
GENERAL_LATENCY += (45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600)
TTFT = GENERAL_LATENCY[:24]
SCHEDULER = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
REQUEST_BYTES = tuple(2**i for i in range(6, 31))  # 64 B ... 1 GiB
RESPONSE_BYTES = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32778, 65536)
TOKENS = (1, *(2**i for i in range(3, 15)), 32778, *(2**i for i in range(16, 21)))
OUTPUT_TOKENS = TOKENS[:12]
NTPOT = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
RECONCILE: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
)
RECONCILE += (1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60)
WORKQUEUE = tuple(10e-9 * 10**i for i in range(12))  # prometheus.ExponentialBuckets(10e-9, 10, 12)
REST_LATENCY = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
REST_BYTES: tuple[float, ...] = (64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
# (extension_point, plugin_type, plugin_name): llm-d's deploy/config/epp-config.yaml and a producer
PLUGINS = (
    ("Filter", "decode-filter", "decode-filter"),
    ("Picker", "max-score-picker", "max-score-picker"),
    ("PrepareData", "prefix-cache-producer", "prefix-cache-producer"),
    ("PreRequest", "prefix-cache-producer", "prefix-cache-producer"),
    ("ProfilePicker", "single-profile-handler", "single-profile-handler"),
    ("Scorer", "prefix-cache-scorer", "prefix-cache-scorer"),
)
#: request families by kind: (the old name, the llm-d name, the buckets and median, or None for counters)
REQUEST_KINDS = {
    "requests": ("request_total", "request_total", None),
    "errors": ("request_error_total", "request_error_total", None),
    "duration": ("request_duration_seconds", "request_duration_seconds", (GENERAL_LATENCY, 2.2)),
    "request_bytes": ("request_sizes", "request_size_bytes", (REQUEST_BYTES, 3100)),
    "response_bytes": ("response_sizes", "response_size_bytes", (RESPONSE_BYTES, 1900)),
    "input_tokens": ("input_tokens", "request_input_tokens", (TOKENS, 780)),
    "output_tokens": ("output_tokens", "request_output_tokens", (OUTPUT_TOKENS, 220)),
    "cached_tokens": ("prompt_cached_tokens", "request_cached_tokens", (TOKENS, 512)),
    "ntpot": ("normalized_time_per_output_token_seconds", "request_ntpot_seconds", (NTPOT, 0.011)),
    "running": ("running_requests", "request_running", None),
}
LLM_D_KEYS = ("model_name", "target_model_name", "fairness_id", "priority")
#: the old names' request labels (modelWithPriorityLabels, modelLabels, the running gauge's model)
OLD_KEYS = {"requests": LLM_D_KEYS[:2] + ("priority",), "running": ("model_name",)}


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
        out = text[0] + ("." + text[1:] if len(text) > 1 else "") + f"e{'-' if e < 0 else '+'}{abs(e):02d}"
    elif point <= 0:
        out = "0." + "0" * -point + text
    else:
        out = text[:point] + "0" * (point - len(text)) + ("." + text[point:] if point < len(text) else "")
    return ("-" if sign else "") + out


@dataclass
class Family:
    name: str
    type: str
    #: (labels, value) for counters and gauges; (labels, bounds, cumulative counts, sum) for
    #: histograms; (labels, quantiles, count, sum) for summaries
    series: list[tuple] = field(default_factory=list)
    help: str = ""

    def text(self) -> str:
        lines = [f"# HELP {self.name} {self.help or HELP[self.name]}", f"# TYPE {self.name} {self.type}"]
        for labels, *rest in self.series:
            if self.type in ("histogram", "summary"):
                points, counts, total = rest
                if self.type == "histogram":
                    points = [("le", b, c) for b, c in zip((*points, math.inf), counts)]
                    count = counts[-1]
                else:
                    points, count = [("quantile", q, v) for q, v in points], counts
                suffix = "_bucket" if self.type == "histogram" else ""
                lines += [f"{self.name}{suffix}{_labels(labels, (k, go_float(b)))} {go_float(v)}" for k, b, v in points]
                lines.append(f"{self.name}_sum{_labels(labels)} {go_float(total)}")
                lines.append(f"{self.name}_count{_labels(labels)} {go_float(count)}")
            else:
                lines.append(f"{self.name}{_labels(labels)} {go_float(rest[0])}")
        return "\n".join(lines) + "\n"


def _labels(labels: dict[str, str], extra: tuple[str, str] | None = None) -> str:
    pairs = [f'{k}="{v}"' for k, v in sorted(labels.items())] + ([f'{extra[0]}="{extra[1]}"'] if extra else [])
    return "{" + ",".join(pairs) + "}" if pairs else ""


def histogram(count: float, bounds: tuple[float, ...], median: float, spread: float = 2.5) -> tuple:
    """(bounds, cumulative counts with +Inf, sum) of `count` whole observations spread log-normally
    around `median`."""
    cdf = [0.5 * (1 + math.erf(math.log(b / median) / (math.log(spread) * math.sqrt(2)))) for b in bounds]
    return bounds, [float(math.floor(count * share)) for share in cdf] + [float(count)], round(count * median * 1.18, 6)


def runtime_families(gc_cycles: int) -> list[Family]:
    """client_golang's Go runtime and process collectors."""
    gc = ((0, 3.1e-05), (0.25, 6.0812e-05), (0.5, 7.9941e-05), (0.75, 0.000112774), (1, 0.004177201))
    fixed = [Family(f["name"], f["type"], [(f["labels"], f["value"])], f["help"]) for f in FAMILIES["runtime"]]
    return [Family("go_gc_duration_seconds", "summary", [({}, gc, gc_cycles, 1.935728411)]), *fixed]


def controller_runtime_families() -> list[Family]:
    """controller-runtime's registry: reconciles, workqueues, the REST client, leader election, certwatcher."""
    per = {c: {"controller": c} for c in RECONCILES}
    queues = {c: {"name": c, "controller": c} for c in RECONCILES}
    verbs = {v: {"host": API_HOST, "verb": v} for v in VERBS}

    def each(labels: dict[str, dict[str, str]], value: float) -> list[tuple]:
        return [(one, value) for one in labels.values()]

    def hist(
        name: str, labels: dict[str, dict[str, str]], counts: dict[str, int], bounds: tuple[float, ...], *shape: float
    ) -> Family:
        """A histogram family of one series per key of `counts`, each of that many observations."""
        return Family(name, "histogram", [(labels[key], *histogram(n, bounds, *shape)) for key, n in counts.items()])

    return [
        Family("certwatcher_read_certificate_errors_total", "counter", [({}, 0)]),
        Family("certwatcher_read_certificate_total", "counter", [({}, 3)]),
        Family("controller_runtime_active_workers", "gauge", each(per, 0)),
        Family("controller_runtime_max_concurrent_reconciles", "gauge", each(per, 1)),
        Family("controller_runtime_reconcile_errors_total", "counter", each(per, 0)),
        Family("controller_runtime_reconcile_panics_total", "counter", each(per, 0)),
        hist("controller_runtime_reconcile_time_seconds", per, RECONCILES, RECONCILE, 0.0004, 3.0),
        Family("controller_runtime_reconcile_timeouts_total", "counter", each(per, 0)),
        Family(
            "controller_runtime_reconcile_total",
            "counter",
            [
                ({**per[c], "result": r}, n if r == "success" else 0)
                for c, n in RECONCILES.items()
                for r in ("error", "requeue", "requeue_after", "success")
            ],
        ),
        Family("controller_runtime_terminal_reconcile_errors_total", "counter", each(per, 0)),
        Family("leader_election_master_status", "gauge", [({"name": "epp-vllm-llama-3-8b.llm-d.ai"}, 1)]),
        hist("rest_client_rate_limiter_duration_seconds", verbs, VERBS, REST_LATENCY, 2e-06),
        hist("rest_client_request_duration_seconds", verbs, VERBS, REST_LATENCY, 0.004),
        Family("rest_client_request_retries_total", "counter", []),
        hist("rest_client_request_size_bytes", verbs, VERBS, REST_BYTES, 300),
        Family(
            "rest_client_requests_total",
            "counter",
            [({"code": "200", "host": API_HOST, "method": v}, n) for v, n in VERBS.items()]
            + [({"code": "409", "host": API_HOST, "method": "PUT"}, 3)],
        ),
        hist("rest_client_response_size_bytes", verbs, VERBS, REST_BYTES, 2400),
        Family("workqueue_adds_total", "counter", [(queues[c], n) for c, n in RECONCILES.items()]),
        Family("workqueue_depth", "gauge", [({**q, "priority": ""}, 0) for q in queues.values()]),
        Family("workqueue_longest_running_processor_seconds", "gauge", each(queues, 0)),
        hist("workqueue_queue_duration_seconds", queues, RECONCILES, WORKQUEUE, 3e-05, 4.0),
        Family("workqueue_retries_total", "counter", each(queues, 0)),
        Family("workqueue_unfinished_work_seconds", "gauge", each(queues, 0)),
        hist("workqueue_work_duration_seconds", queues, RECONCILES, WORKQUEUE, 0.0004, 3.0),
    ]


def _by(keys: tuple[str, ...], source: Mapping[tuple[str, str, str, str], float]) -> dict[tuple, float]:
    """The traffic summed over the request labels not in `keys` (what a vector without them counts)."""
    out: dict[tuple, float] = {}
    for key, value in source.items():
        reduced = tuple(key[LLM_D_KEYS.index(k)] for k in keys)
        out[reduced] = out.get(reduced, 0) + value
    return out


def request_families(prefix: str, keys: dict[str, tuple[str, ...]], deprecated: bool = False) -> list[Family]:
    """The request path's families under one naming (`llm_d_epp` or `inference_objective`), each
    series labelled by the request labels that family carries (`keys`, by kind)."""
    out = []
    for kind, (old, new, buckets) in REQUEST_KINDS.items():
        name = f"{prefix}_{new if prefix == 'llm_d_epp' else old}"
        labels = keys.get(kind, keys.get("other", LLM_D_KEYS))
        if kind == "errors":
            errors: dict[tuple, float] = {}
            for key, codes in ERRORS.items():
                (reduced,) = _by(labels, {key: 0})
                for code, n in codes.items():
                    errors[(*reduced, code)] = errors.get((*reduced, code), 0) + n
            series: list[tuple] = [
                ({**dict(zip(labels, k[:-1])), "error_code": k[-1]}, n) for k, n in sorted(errors.items())
            ]
        elif buckets is None:
            value = {"requests": None, "running": 1}[kind]
            series = [
                (dict(zip(labels, k)), v if value is None else value) for k, v in sorted(_by(labels, TRAFFIC).items())
            ]
        else:
            share = 0.6 if kind == "cached_tokens" else 1.0
            series = [
                (dict(zip(labels, k)), *histogram(math.floor(v * share), *buckets))
                for k, v in sorted(_by(labels, TRAFFIC).items())
            ]
        out.append(
            Family(
                name,
                "histogram" if buckets else ("gauge" if kind == "running" else "counter"),
                series,
                _undeprecated(name, deprecated),
            )
        )
    if prefix == "llm_d_epp":  # streamed and not, apart
        ttft = []
        for k, v in sorted(_by(LLM_D_KEYS, TRAFFIC).items()):
            streamed = math.floor(v * STREAMED_SHARE)
            ttft.append(({**dict(zip(LLM_D_KEYS, k)), "streaming": "false"}, *histogram(v - streamed, TTFT, 2.2)))
            ttft.append(({**dict(zip(LLM_D_KEYS, k)), "streaming": "true"}, *histogram(streamed, TTFT, 0.31)))
        out.append(Family("llm_d_epp_request_ttft_seconds", "histogram", ttft))
    return out


def _undeprecated(name: str, deprecated: bool) -> str:
    """A family's help text; without its `[Deprecated: ...]` mark where it is not deprecated yet."""
    return HELP[name] if deprecated else re.sub(r"\[Deprecated: Use \S+\] ", "", HELP[name])


def epp_families(prefix: str, deprecated: bool = False) -> list[Family]:
    """The pool, scheduler, plugin and info families (`llm_d_epp`, or the older
    `inference_pool`/`inference_extension` pair)."""
    llm_d = prefix == "llm_d_epp"
    pool, ext = (prefix, prefix) if llm_d else ("inference_pool", "inference_extension")
    total = sum(TRAFFIC.values())
    endpoint = "endpoint_name" if llm_d else "pod_name"
    attempts = [
        (
            {"status": "success", "target_model_name": t, endpoint: e, "namespace": "llm-d", "port": "8000"},
            n // len(ENDPOINTS),
        )
        for (_, t), n in sorted(_by(("model_name", "target_model_name"), TRAFFIC).items())
        for e in ENDPOINTS
    ]
    families = [
        Family(f"{pool}_average_kv_cache_utilization", "gauge", [({"name": POOL}, 0.4125)]),
        Family(f"{pool}_average_queue_size", "gauge", [({"name": POOL}, 1.25)]),
        Family(f"{pool}_average_running_requests", "gauge", [({"name": POOL}, 11.5)]),
        Family(f"{pool}_{'ready_endpoints' if llm_d else 'ready_pods'}", "gauge", [({"name": POOL}, len(ENDPOINTS))]),
        Family(f"{ext}_info", "gauge", [({"build_ref": "v0.6.0", "commit": "ebab6879"}, 1)]),
        Family(
            f"{ext}_plugin_duration_seconds",
            "histogram",
            [
                ({"extension_point": p, "plugin_type": t, "plugin_name": n}, *histogram(total, SCHEDULER, 4e-05, 3.0))
                for p, t, n in PLUGINS
            ],
        ),
        Family(f"{ext}_scheduler_attempts_total", "counter", attempts),
        Family(f"{ext}_scheduler_e2e_duration_seconds", "histogram", [({}, *histogram(total, SCHEDULER, 0.0003))]),
    ]
    for family in families:
        family.help = _undeprecated(family.name, deprecated)
    return families


def exposition(families: list[Family]) -> str:
    """The body `Registry.Gather` gives: families sorted by name."""
    return "".join(family.text() for family in sorted(families, key=lambda f: f.name))


def llm_d_router() -> str:
    """llm-d's EPP (llm-d/llm-d-router): every family twice, `llm_d_epp_*` and its deprecated twin."""
    new = request_families("llm_d_epp", {})
    old = request_families("inference_objective", {**OLD_KEYS, "other": LLM_D_KEYS[:2]}, deprecated=True)
    return exposition(
        runtime_families(19_021) + controller_runtime_families() + new + old
        + epp_families("llm_d_epp") + epp_families("inference_extension", deprecated=True)
    )  # fmt: skip


def inference_extension() -> str:
    """The Gateway API Inference Extension's EPP before the move: its own names only."""
    old = request_families("inference_objective", {**OLD_KEYS, "other": LLM_D_KEYS[:2]})
    return exposition(
        runtime_families(19_022) + controller_runtime_families() + old + epp_families("inference_extension")
    )


if __name__ == "__main__":
    LLM_D_CAPTURE.write_text(llm_d_router())
    GAIE_CAPTURE.write_text(inference_extension())
