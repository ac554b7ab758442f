"""Engine types, gateway types and GPU modes are named once, by the module that implements them
(exporter/registry.py): the configuration, the CLI, discovery, detection and the docs read the
registries, so an engine added in one module is accepted everywhere (docs/contributing.md)."""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter import cli
from exporter.config import ConfigError, build, parse_engine_flag, parse_gateway_flag
from exporter.discovery.kubernetes import target_for_pod
from exporter.registry import Registry
from exporter.settings import EngineTarget, GpuSettings, HealthSettings, KubernetesSettings
from exporter.sources.base import Source, collect_now
from exporter.sources.device_exporter import ExporterIngest
from exporter.sources.engine import EngineSource
from exporter.sources.engines import MAPPINGS as ENGINES
from exporter.sources.engines import detect as detect_engine
from exporter.sources.engines.common import DeclarativeMapping, EngineMapping, Signal, has_prefix
from exporter.sources.gateways import MAPPINGS as GATEWAYS
from exporter.sources.gateways.common import GatewayMapping
from exporter.sources.gpu import GPU_MODES, build_gpu_source
from exporter.sources.gpu_modes import GpuMode
from exporter.sources.node import NODE_SOURCES, NodeContext
from exporter.stages.vendors import BANDWIDTH_SIGNALS, NO_BANDWIDTH_SIGNAL
from tests.support import UNHURRIED, RouteServer, respond_with, sample_value

REPO = Path(__file__).resolve().parents[2]


class ToyMapping(DeclarativeMapping):
    """A throwaway engine, as docs/contributing.md adds one: a name, its signals, how to know it."""

    engine_type = "toy"
    signals = (Signal("requests_running", ("toy_running",)), Signal("requests_waiting", ("toy_waiting",)))

    def matches(self, names: set[str]) -> bool:
        return has_prefix(names, "toy_")


@contextlib.contextmanager
def registered(registry: Registry, name: str, entry: object, order: int = 0) -> Iterator[None]:
    registry.register(entry, order)
    try:
        yield
    finally:
        registry.unregister(name)


def _help() -> str:
    """`serve --help` as a user reads it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli.make_parser(["serve", "--help"]).parse_args(["serve", "--help"])
    return " ".join(out.getvalue().split())


# ---- every implementation registers itself ------------------------------------------------------


def _classes_in(package: str, base: type) -> set[type]:
    module = importlib.import_module(package)
    found = set()
    for info in pkgutil.iter_modules(module.__path__):
        for _, value in inspect.getmembers(importlib.import_module(f"{package}.{info.name}"), inspect.isclass):
            if issubclass(value, base) and not inspect.isabstract(value) and value.__module__.startswith(package):
                found.add(value)
    return found


@pytest.mark.parametrize(
    "package, base, registry",
    [
        ("exporter.sources.engines", EngineMapping, ENGINES),
        ("exporter.sources.gateways", GatewayMapping, GATEWAYS),
    ],
)
def test_every_mapping_in_its_package_is_registered(package: str, base: type, registry: Registry) -> None:
    classes = _classes_in(package, base) - {DeclarativeMapping}
    assert classes, package
    assert classes == {type(entry) for entry in registry.values()}


def test_every_exporter_ingest_in_gpu_exporters_is_a_registered_mode() -> None:
    classes = _classes_in("exporter.sources.gpu_exporters", ExporterIngest)
    assert classes
    for source in classes:
        mode = GPU_MODES[source.name]
        assert mode.exporter_port is not None, f"{source.name} ingests a URL"
        assert isinstance(mode.build(GpuSettings(mode.name, "http://127.0.0.1:9/metrics"), None, 5.0), source)


def test_every_node_source_is_registered_under_its_source_label_and_built_where_it_has_something_to_read(
    tmp_path: Path,
) -> None:
    classes = _classes_in("exporter.sources.node", Source)
    assert classes
    assert {source.name for source in classes} == set(NODE_SOURCES.names())
    bare = NodeContext(str(tmp_path), HealthSettings(), lambda: ())
    (tmp_path / "rdma" / "class" / "infiniband").mkdir(parents=True)
    with_rdma = NodeContext(str(tmp_path / "rdma"), HealthSettings(), lambda: ())
    for source in classes:
        built = NODE_SOURCES[source.name].build(with_rdma)
        assert isinstance(built, source), source.name
    assert NODE_SOURCES["links"].build(bare) is None, "no RDMA devices: nothing for the links source to read"


def test_a_name_taken_by_another_module_is_refused() -> None:
    class Impostor(ToyMapping):
        engine_type = "vllm"

    with pytest.raises(ValueError, match="engine type 'vllm' is registered twice"):
        ENGINES.register(Impostor())
    assert type(ENGINES["vllm"]).__name__ == "VllmMapping"


def test_detection_tries_the_mappings_in_their_stated_order() -> None:
    engines, gateways = list(ENGINES), list(GATEWAYS)
    # Triton's TensorRT-LLM families beside a vLLM backend's mean Triton; trtllm's unprefixed first
    # names come last; the endpoint picker before the Envoy AI Gateway that fronts it.
    assert engines.index("triton") < engines.index("vllm")
    assert engines[-1] == "trtllm"
    assert gateways.index("epp") < gateways.index("envoy-ai-gateway")
    assert detect_engine({"nv_trt_llm_request_metrics", "vllm:num_requests_running"}) is ENGINES["triton"]


def test_every_vendor_a_gpu_mode_reads_is_known_to_the_diagnosis() -> None:
    vendors = {mode.vendor for mode in GPU_MODES.values() if mode.vendor is not None}
    assert {"nvidia", "amd"} <= vendors
    assert vendors <= set(BANDWIDTH_SIGNALS) | set(NO_BANDWIDTH_SIGNAL), "exporter/stages/vendors.py"


# ---- an engine added in one module is accepted everywhere ---------------------------------------


def test_an_engine_registered_in_one_place_is_read_by_every_consumer() -> None:
    with registered(ENGINES, "toy", ToyMapping(), order=50):
        config = build({"engines": [{"url": "http://127.0.0.1:1/metrics", "type": "toy"}]})
        assert config.engines[0].type == "toy"
        assert parse_engine_flag("toy=http://127.0.0.1:1/metrics") == {
            "type": "toy",
            "url": "http://127.0.0.1:1/metrics",
        }
        pod = {
            "metadata": {"name": "p", "namespace": "n", "annotations": _annotations("toy")},
            "spec": {"nodeName": "node", "containers": []},
            "status": {"phase": "Running", "podIP": "10.0.0.7"},
        }
        target, why = target_for_pod(pod, "node", KubernetesSettings(enabled=True))
        assert target is not None and target.type == "toy", why
        assert "toy" in _help()
        assert detect_engine({"toy_running"}) is ENGINES["toy"]
        payload = 'toy_running{model_name="m"} 3\ntoy_waiting{model_name="m"} 1\n'
        server = RouteServer({"/metrics": respond_with(payload)})
        source = EngineSource(EngineTarget(url=server.url("/metrics"), name="e", type="toy", limits=UNHURRIED), 60.0)
        try:
            metrics = collect_now(source, 0.0)
        finally:
            source.close()
            server.close()
        assert sample_value(metrics, "llm_engine_requests_running", engine="e", engine_type="toy", model="m") == 3.0
        assert sample_value(metrics, "llm_engine_requests_waiting", engine="e", engine_type="toy", model="m") == 1.0
    with pytest.raises(ConfigError, match=r"engines\[0\]\.type"):
        build({"engines": [{"url": "http://127.0.0.1:1/metrics", "type": "toy"}]})
    assert "toy" not in _help()


def _annotations(engine_type: str) -> dict[str, str]:
    prefix = "llm-bottleneck-exporter/"
    return {prefix + "scrape": "true", prefix + "port": "8000", prefix + "type": engine_type}


def test_an_unknown_type_is_refused_naming_every_registered_one() -> None:
    with pytest.raises(ConfigError) as engine_error:
        parse_engine_flag("nope=http://127.0.0.1:1/metrics")
    assert all(name in str(engine_error.value) for name in ENGINES.names())
    with pytest.raises(ConfigError) as gateway_error:
        parse_gateway_flag("nope=http://127.0.0.1:1/metrics")
    assert all(name in str(gateway_error.value) for name in GATEWAYS.names())
    with pytest.raises(ConfigError) as gpu_error:
        build({"gpu": "nope"})
    assert all(mode.usage in str(gpu_error.value) for mode in GPU_MODES.values())


def test_a_gpu_mode_registered_in_one_place_is_accepted_and_built() -> None:
    built: list[GpuSettings] = []

    def build_toy(gpu: GpuSettings, attributor: object, interval: float) -> None:
        built.append(gpu)

    toy = GpuMode("toy-exporter", "a toy exporter", build_toy, vendor="nvidia", exporter_port=9999)
    with registered(GPU_MODES, toy.name, toy):
        with pytest.raises(ConfigError, match="toy-exporter=http://HOST:9999/metrics"):
            build({"gpu": "toy-exporter"})
        config = build({"gpu": "toy-exporter=http://127.0.0.1:9999/metrics"})
        assert "toy-exporter=URL" in _help()
        attributor = type("Attributor", (), {"close": lambda self: None})()
        assert build_gpu_source(config.gpu, attributor, 5.0) is None
        assert built == [GpuSettings("toy-exporter", "http://127.0.0.1:9999/metrics")]
    with pytest.raises(ConfigError, match="unknown GPU mode"):
        build({"gpu": "toy-exporter=http://127.0.0.1:9999/metrics"})


# ---- the docs list what is registered -----------------------------------------------------------

DOCS = sorted([*REPO.glob("docs/*.md"), REPO / "README.md", *REPO.glob("deploy/**/*.md")])


def _listed(line: str, names: tuple[str, ...]) -> set[str]:
    """The names a line lists in backticks, or in a code block's `  # a, b or c` comment."""
    quoted = set(re.findall(r"`([a-z0-9-]+)(?:=URL)?`", line))
    comment = set(re.findall(r"[a-z0-9-]+", line.partition("  # ")[2]))
    return (quoted | comment) & set(names)


def _groups(registry: Registry) -> list[set[str]]:
    """The lists a line may give: every name, or (GPU modes) the modes that ingest an exporter."""
    groups = [set(registry.names())]
    if registry is GPU_MODES:
        groups.append({mode.name for mode in GPU_MODES.values() if mode.exporter_port is not None})
    return groups


@pytest.mark.parametrize(
    "what, registry", [("engine type", ENGINES), ("gateway type", GATEWAYS), ("GPU mode", GPU_MODES)]
)
def test_a_docs_line_that_lists_the_names_lists_them_all(what: str, registry: Registry) -> None:
    names = registry.names()
    short = []
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            listed = _listed(line, names)
            if len(listed) < 3:
                continue
            group = next(g for g in (*_groups(registry)[1:], set(names)) if listed <= g)
            missing = sorted(name for name in group if not re.search(rf"(?<![\w-]){name}(?![\w-])", line))
            if missing:
                short.append(f"{path.relative_to(REPO)}:{number} lists {what}s but not {', '.join(missing)}")
    assert short == []


def test_the_gpu_docs_table_has_a_row_per_mode() -> None:
    text = (REPO / "docs" / "gpu.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z0-9-]+)(?:=URL)?`", text.partition("## ")[0], re.M)
    assert sorted(rows) == sorted(GPU_MODES.names())


def test_no_module_outside_the_registries_spells_out_a_list_of_types() -> None:
    """A tuple, list or set literal holding three or more engine types (or gateway types, or GPU
    modes) is a second list to keep in step."""
    offenders = []
    for path in sorted((REPO / "exporter").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                strings = {
                    item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)
                }
                for registry in (ENGINES, GATEWAYS, GPU_MODES):
                    if len(strings & set(registry.names())) >= 3:
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} ({registry.what}s)")
    assert offenders == []
