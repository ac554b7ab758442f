"""The DCGM source end to end against a fake pydcgm: mapping, blank filtering and error handling.

pydcgm ships only with DCGM itself (it is not on PyPI) and needs libdcgm and a GPU, so these tests
inject a fake `pydcgm` and `dcgm_structs` into `sys.modules`: a small in-memory host engine that
follows the documented pydcgm API (DcgmHandle / DcgmGroup / DcgmFieldGroup, `samples.WatchFields`,
`GetLatest_v2(...).values[entityGroup][gpuId][fieldId]` time series of values with `.value`,
`.ts`, `.isBlank`, `GetAllSinceLastCall_v2`, `GetSystem().profiling.Pause/Resume`, `DCGMError`
subclasses carrying the DCGM_ST_* code in `.value`). The source imports it lazily, as it would the
real bindings; nothing here proves the real library behaves the same, which only a GPU machine
with DCGM can show.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from exporter.attribution import GpuRef
from exporter.sources import dcgm_connection, dcgm_reader
from exporter.sources.base import SourceError
from exporter.sources.dcgm import DcgmSource
from exporter.sources.gpu_common import START_UP_TIMEOUT_SECONDS

MIB = 2**20
INT64_BLANK, FP64_BLANK = 0x7FFFFFFFFFFFFFF0, 140737488355328.0
CONNECTION_NOT_VALID, LIBRARY_NOT_FOUND, REQUIRES_ROOT = -21, -25, -29
MODULE_NOT_LOADED, PROFILING_NOT_SUPPORTED, BADPARAM = -33, -36, -1


class DCGMError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"DCGM error {value}")
        self.value = value


@dataclass
class Value:
    value: Any
    ts: int = 1
    isBlank: bool = False


@dataclass
class HostEngine:
    """What the fake pydcgm answers from; tests change it between collections."""

    gpus: dict[int, tuple[str, str]]
    latest: dict[int, dict[int, Any]] = field(default_factory=dict)
    xids: dict[int, list[Value]] = field(default_factory=dict)
    connect_error: int | None = None
    read_error: int | None = None
    profiling_error: int | None = None
    connections: list[dict] = field(default_factory=list)
    ts: int = 100
    #: DcgmSystem.profiling's Pause and Resume calls, in order; pause_error: the code Pause raises
    profiling_calls: list[str] = field(default_factory=list)
    pause_error: int | None = None


def fake_modules(engine: HostEngine) -> tuple[ModuleType, ModuleType]:
    structs = ModuleType("dcgm_structs")
    structs.DCGMError = DCGMError
    structs.DCGM_OPERATION_MODE_AUTO = 1
    structs.DCGM_GROUP_EMPTY = 1

    class Collection:
        def __init__(self, values: dict) -> None:
            self.values = values

    class Samples:
        def __init__(self, group: Group) -> None:
            self.group = group

        def WatchFields(self, field_group, update_freq, max_keep_age, max_keep_samples):  # noqa: N802
            assert update_freq > 0 and max_keep_age > 0
            if any(f >= 1001 for f in field_group.fieldIds) and engine.profiling_error is not None:
                raise DCGMError(engine.profiling_error)
            self.group.watched.append(field_group)

        def _values(self, field_group, series_of) -> dict:
            if engine.read_error is not None:
                raise DCGMError(engine.read_error)
            assert field_group in self.group.watched
            return {1: {gpu: {f: series_of(gpu, f) for f in field_group.fieldIds} for gpu in self.group.gpus}}

        def GetLatest_v2(self, field_group):  # noqa: N802
            def latest(gpu, field_id):
                value = engine.latest.get(gpu, {}).get(field_id)
                if value is None:
                    return SimpleNamespace(values=[])
                return SimpleNamespace(values=[value if isinstance(value, Value) else Value(value, engine.ts)])

            return Collection(self._values(field_group, latest))

        def GetAllSinceLastCall_v2(self, collection, field_group):  # noqa: N802
            def since(gpu, field_id):
                series = engine.xids.get(gpu, [])
                mark = self.group.xid_marks.get(gpu)
                self.group.xid_marks[gpu] = max((v.ts for v in series), default=0)
                new = [v for v in series if mark is None or v.ts > mark]
                # As documented: with nothing new, the latest value is returned again.
                return SimpleNamespace(values=new or series[-1:])

            return Collection(self._values(field_group, since))

    class Group:
        def __init__(self, handle, groupName, groupType):  # noqa: N803
            self.gpus: list[int] = []
            self.watched: list = []
            self.xid_marks: dict[int, int] = {}
            self.samples = Samples(self)

        def AddGpu(self, gpu_id):  # noqa: N802
            self.gpus.append(gpu_id)

        def Delete(self):  # noqa: N802
            pass

    class FieldGroup:
        def __init__(self, handle, name="", fieldIds=None):  # noqa: N803
            self.name, self.fieldIds = name, list(fieldIds or [])

        def Delete(self):  # noqa: N802
            pass

    class Handle:
        def __init__(self, ipAddress=None, opMode=1, unixSocketPath=None, timeoutMs=0):  # noqa: N803
            engine.connections.append({"ipAddress": ipAddress, "unixSocketPath": unixSocketPath})
            if engine.connect_error is not None:
                raise DCGMError(engine.connect_error)

        def GetSystem(self):  # noqa: N802
            def pause():
                engine.profiling_calls.append("Pause")
                if engine.pause_error is not None:
                    raise DCGMError(engine.pause_error)

            def attributes(gpu_id):
                uuid, name = engine.gpus[gpu_id]
                return SimpleNamespace(identifiers=SimpleNamespace(uuid=uuid.encode(), deviceName=name.encode()))

            return SimpleNamespace(
                discovery=SimpleNamespace(
                    GetAllSupportedGpuIds=lambda: sorted(engine.gpus), GetGpuAttributes=attributes
                ),
                UpdateAllFields=lambda wait: None,
                profiling=SimpleNamespace(Pause=pause, Resume=lambda: engine.profiling_calls.append("Resume")),
            )

        def Shutdown(self):  # noqa: N802
            pass

    pydcgm = ModuleType("pydcgm")
    pydcgm.DcgmHandle, pydcgm.DcgmGroup, pydcgm.DcgmFieldGroup = Handle, Group, FieldGroup
    return pydcgm, structs


def healthy_values(gpu: int) -> dict[int, Any]:
    return {
        100: 1980,
        150: 61 + gpu,
        155: 512.25,
        203: 87,
        250: 81559,
        251: 1000,
        252: 80000,
        112: 0x4,
        1002: 0.45,
        1003: 0.3,
        1004: 0.12,
        1005: 0.95,
        1009: 1.5e9,
        1010: 2.5e9,
        1011: 3.0e10,
        1012: 4.0e10,
    }


@pytest.fixture
def engine(monkeypatch):
    host = HostEngine(gpus={0: ("GPU-aaaa", "NVIDIA H100 80GB HBM3"), 1: ("GPU-bbbb", "NVIDIA H100 80GB HBM3")})
    host.latest = {0: healthy_values(0), 1: healthy_values(1)}
    pydcgm, structs = fake_modules(host)
    monkeypatch.setitem(sys.modules, "pydcgm", pydcgm)
    monkeypatch.setitem(sys.modules, "dcgm_structs", structs)
    return host


def by_gpu(metrics, name):
    return {m.labels["gpu"]: m.value for m in metrics if m.name == name}


def test_fields_map_by_id_to_our_units(engine):
    source = DcgmSource("127.0.0.1:5555")
    assert source.deadline_seconds() == START_UP_TIMEOUT_SECONDS  # connecting, watching the fields
    metrics = source.collect(0.0)
    assert source.deadline_seconds() == source.timeout_seconds
    gpu0 = {m.name: m.value for m in metrics if m.labels["gpu"] == "0" and m.name != "llm_gpu_throttle_reason_active"}
    assert gpu0 == {
        "llm_gpu_up": 1.0,
        "llm_gpu_sm_clock_hertz": 1980e6,
        "llm_gpu_temperature_celsius": 61.0,
        "llm_gpu_power_watts": 512.25,
        "llm_gpu_utilization_ratio": 0.87,
        "llm_gpu_memory_total_bytes": 81559 * MIB,
        "llm_gpu_memory_used_bytes": 80000 * MIB,
        "llm_gpu_sm_active_ratio": 0.45,
        "llm_gpu_sm_occupancy_ratio": 0.3,
        "llm_gpu_tensor_active_ratio": 0.12,
        "llm_gpu_dram_active_ratio": 0.95,
        "llm_gpu_pcie_transmit_bytes_per_second": 1.5e9,
        "llm_gpu_pcie_receive_bytes_per_second": 2.5e9,
        "llm_gpu_nvlink_transmit_bytes_per_second": 3.0e10,
        "llm_gpu_nvlink_receive_bytes_per_second": 4.0e10,
    }
    labels = next(m.labels for m in metrics if m.name == "llm_gpu_up" and m.labels["gpu"] == "1")
    assert labels == {"gpu": "1", "uuid": "GPU-bbbb", "gpu_model": "NVIDIA H100 80GB HBM3", "vendor": "nvidia"}
    throttle = {
        m.labels["reason"]: m.value
        for m in metrics
        if m.name == "llm_gpu_throttle_reason_active" and m.labels["gpu"] == "0"
    }
    assert throttle["power_cap"] == 1.0 and throttle["hw_thermal"] == 0.0


@pytest.mark.parametrize(
    "blank", [INT64_BLANK, INT64_BLANK + 2, FP64_BLANK, FP64_BLANK * 100, float("nan"), Value(55, isBlank=True)]
)
def test_blank_sentinels_are_left_out(engine, blank):
    engine.latest[0][150] = blank
    engine.latest[0][1002] = blank if not isinstance(blank, int) else FP64_BLANK
    metrics = DcgmSource("127.0.0.1").collect(0.0)
    assert "0" not in by_gpu(metrics, "llm_gpu_temperature_celsius")
    assert "0" not in by_gpu(metrics, "llm_gpu_sm_active_ratio")
    assert by_gpu(metrics, "llm_gpu_power_watts")["0"] == 512.25


def test_string_blank_is_blank():
    assert dcgm_reader.is_blank("<<<NULL>>>") and dcgm_reader.is_blank(b"<<<NULL>>>")
    assert not dcgm_reader.is_blank(0) and not dcgm_reader.is_blank(0.0)


def test_gpu_without_any_value_is_down(engine):
    engine.latest[1] = {field_id: INT64_BLANK for field_id in healthy_values(1)}
    metrics = DcgmSource("127.0.0.1").collect(0.0)
    assert by_gpu(metrics, "llm_gpu_up") == {"0": 1.0, "1": 0.0}


def test_total_memory_from_used_and_free_when_total_is_blank(engine):
    engine.latest[0][250] = INT64_BLANK
    metrics = DcgmSource("127.0.0.1").collect(0.0)
    assert by_gpu(metrics, "llm_gpu_memory_total_bytes")["0"] == 81000 * MIB


@pytest.mark.parametrize("code", [PROFILING_NOT_SUPPORTED, REQUIRES_ROOT, MODULE_NOT_LOADED])
def test_profiling_unavailable_leaves_only_profiling_metrics_out(engine, code):
    engine.profiling_error = code
    metrics = DcgmSource("127.0.0.1").collect(0.0)
    assert by_gpu(metrics, "llm_gpu_up") == {"0": 1.0, "1": 1.0}
    assert by_gpu(metrics, "llm_gpu_power_watts") == {"0": 512.25, "1": 512.25}
    assert by_gpu(metrics, "llm_gpu_sm_active_ratio") == {}


def test_other_errors_watching_profiling_fail_the_source(engine):
    engine.profiling_error = BADPARAM
    with pytest.raises(SourceError) as raised:
        DcgmSource("127.0.0.1").collect(0.0)
    assert raised.value.reason == "dcgm_error"


def test_host_engine_down_is_a_connection_error(engine):
    engine.connect_error = CONNECTION_NOT_VALID
    with pytest.raises(SourceError) as raised:
        DcgmSource("127.0.0.1").collect(0.0)
    assert raised.value.reason == "connection"


def test_lost_connection_reconnects_on_the_next_collection(engine):
    source = DcgmSource("127.0.0.1")
    source.collect(0.0)
    engine.read_error = CONNECTION_NOT_VALID
    with pytest.raises(SourceError) as raised:
        source.collect(5.0)
    assert raised.value.reason == "connection"
    engine.read_error = None
    assert by_gpu(source.collect(10.0), "llm_gpu_up") == {"0": 1.0, "1": 1.0}
    assert len(engine.connections) == 2


def test_libdcgm_missing_makes_the_source_unavailable(engine):
    engine.connect_error = LIBRARY_NOT_FOUND
    with pytest.raises(SourceError) as raised:
        DcgmSource("127.0.0.1").collect(0.0)
    assert raised.value.reason == "unavailable"


def test_pydcgm_not_importable_makes_the_source_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pydcgm", None)
    monkeypatch.setattr(dcgm_connection, "BINDINGS_PATHS", ())
    with pytest.raises(SourceError) as raised:
        DcgmSource("127.0.0.1").collect(0.0)
    assert raised.value.reason == "unavailable"


def test_embedded_and_unix_socket_addresses(engine):
    DcgmSource("embedded").collect(0.0)
    DcgmSource("unix:///run/dcgm.sock").collect(0.0)
    assert engine.connections == [
        {"ipAddress": None, "unixSocketPath": None},
        {"ipAddress": None, "unixSocketPath": "/run/dcgm.sock"},
    ]


def test_xids_are_counted_once_each_and_old_ones_not_at_all(engine):
    engine.xids = {0: [Value(13, ts=50)]}  # happened before the exporter started
    source = DcgmSource("127.0.0.1")
    assert by_gpu(source.collect(0.0), "llm_gpu_xid_errors_total") == {}
    engine.xids[0] += [Value(79, ts=60), Value(79, ts=70)]
    engine.xids[1] = [Value(48, ts=65)]
    metrics = source.collect(5.0)
    xids = {(m.labels["gpu"], m.labels["xid"]): m.value for m in metrics if m.name == "llm_gpu_xid_errors_total"}
    assert xids == {("0", "79"): 2.0, ("1", "48"): 1.0}
    metrics = source.collect(10.0)  # nothing new: the latest value comes back and is not recounted
    xids = {(m.labels["gpu"], m.labels["xid"]): m.value for m in metrics if m.name == "llm_gpu_xid_errors_total"}
    assert xids == {("0", "79"): 2.0, ("1", "48"): 1.0}


def test_pids_from_nvml_reach_attribution(engine):
    seen: list[GpuRef] = []

    class Attribution:
        def attribute(self, gpus):
            seen.extend(gpus)
            return [{"engine": "vllm-a"} if g.pids else {} for g in gpus]

    class Lister:
        def pids_by_uuid(self):
            return {"GPU-bbbb": frozenset({123})}

        def close(self):
            pass

    metrics = DcgmSource("127.0.0.1", Attribution(), process_lister=Lister()).collect(0.0)  # type: ignore[arg-type]
    assert [g.pids for g in seen] == [frozenset(), frozenset({123})]
    assert by_gpu([m for m in metrics if m.labels.get("engine") == "vllm-a"], "llm_gpu_up") == {"1": 1.0}


def test_profiling_is_paused_around_a_capture_and_its_fields_are_absent_meanwhile(engine):
    source = DcgmSource("127.0.0.1")
    assert by_gpu(source.collect(0.0), "llm_gpu_sm_active_ratio") == {"0": 0.45, "1": 0.45}
    with source.profiling_paused():
        assert engine.profiling_calls == ["Pause"]
        metrics = source.collect(5.0)
        assert by_gpu(metrics, "llm_gpu_sm_active_ratio") == {}  # absent, not 0
        assert by_gpu(metrics, "llm_gpu_dram_active_ratio") == {}
        assert by_gpu(metrics, "llm_gpu_power_watts") == {"0": 512.25, "1": 512.25}
    assert engine.profiling_calls == ["Pause", "Resume"]
    assert by_gpu(source.collect(10.0), "llm_gpu_sm_active_ratio") == {"0": 0.45, "1": 0.45}


def test_profiling_resumes_when_the_capture_fails(engine):
    source = DcgmSource("127.0.0.1")
    source.collect(0.0)
    with pytest.raises(RuntimeError), source.profiling_paused():
        raise RuntimeError("the engine's endpoint failed")
    assert engine.profiling_calls == ["Pause", "Resume"]


def test_two_captures_at_once_resume_when_the_last_ends(engine):
    source = DcgmSource("127.0.0.1")
    source.collect(0.0)
    first, second = source.profiling_paused(), source.profiling_paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert engine.profiling_calls == ["Pause"]
    second.__exit__(None, None, None)
    assert engine.profiling_calls == ["Pause", "Resume"]


def test_a_pause_dcgm_refuses_is_logged_and_the_capture_goes_on(engine, caplog):
    engine.pause_error = MODULE_NOT_LOADED
    source = DcgmSource("127.0.0.1")
    source.collect(0.0)
    ran = []
    with source.profiling_paused():
        ran.append(True)
    assert ran == [True] and engine.profiling_calls == ["Pause", "Resume"]
    assert "profiling pause failed" in caplog.text


def test_a_host_engine_reached_while_paused_is_paused_on_connecting(engine):
    source = DcgmSource("127.0.0.1")
    with source.profiling_paused():
        assert engine.profiling_calls == []  # nothing connected yet: nothing to pause
        assert by_gpu(source.collect(0.0), "llm_gpu_sm_active_ratio") == {}
        assert engine.profiling_calls == ["Pause"]
    assert engine.profiling_calls == ["Pause", "Resume"]


def test_closing_the_source_mid_capture_resumes_profiling_once(engine):
    source = DcgmSource("127.0.0.1")
    source.collect(0.0)
    with source.profiling_paused():
        source.close()  # a reload or the exporter's stop while an engine is profiled
        assert engine.profiling_calls == ["Pause", "Resume"]
    assert engine.profiling_calls == ["Pause", "Resume"]
    with source.profiling_paused():  # the count starts again from none held
        source.collect(5.0)  # reconnects, and pauses as it does
        assert engine.profiling_calls == ["Pause", "Resume", "Pause"]
    assert engine.profiling_calls == ["Pause", "Resume", "Pause", "Resume"]


def test_nothing_to_pause_where_profiling_is_not_watched(engine):
    engine.profiling_error = PROFILING_NOT_SUPPORTED
    source = DcgmSource("127.0.0.1")
    source.collect(0.0)
    with source.profiling_paused():
        source.collect(5.0)
    assert engine.profiling_calls == []


@pytest.mark.parametrize(
    "address, expected",
    [
        ("localhost", ("localhost", 5555)),
        ("10.0.0.1:5556", ("10.0.0.1", 5556)),
        ("[::1]:5555", ("::1", 5555)),
        ("[::1]", ("::1", 5555)),
    ],
)
def test_host_engine_addresses(address, expected):
    assert dcgm_connection.host_and_port(address) == expected
