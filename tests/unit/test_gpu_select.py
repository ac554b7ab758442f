"""`--gpu` chooses the GPU source; `auto` prefers DCGM, then NVML, then AMD SMI, then none, and says why."""

from __future__ import annotations

import logging

import pytest

from exporter.app import build_pipeline
from exporter.attribution import Attributor
from exporter.config import build
from exporter.sources.amd_smi import AmdSmiSource
from exporter.sources.dcgm import DcgmSource
from exporter.sources.gpu import build_gpu_source
from exporter.sources.gpu_exporters.amd_exporter import AmdExporterSource
from exporter.sources.gpu_exporters.ascend_exporter import AscendExporterSource
from exporter.sources.gpu_exporters.dcgm_exporter import DcgmExporterSource
from exporter.sources.gpu_exporters.gaudi_exporter import GaudiExporterSource
from exporter.sources.nvml import NvmlSource

YES = lambda: (True, "it answers")  # noqa: E731
NO = lambda: (False, "nothing there")  # noqa: E731


def refuse():
    pytest.fail("probed although the mode was explicit")


def gpu_args(config):
    """What the composition root hands the GPU source: its settings, an attributor, the interval."""
    return config.gpu, Attributor(config.gpu_attribution, config.engines), config.interval_seconds


@pytest.mark.parametrize(
    "gpu, kind",
    [
        ("nvml", NvmlSource),
        ("dcgm", DcgmSource),
        ("dcgm-exporter=http://127.0.0.1:9400/metrics", DcgmExporterSource),
        ("amdsmi", AmdSmiSource),
        ("amd-exporter=http://127.0.0.1:5000/metrics", AmdExporterSource),
        ("ascend-exporter=http://127.0.0.1:8082/metrics", AscendExporterSource),
        ("gaudi-exporter=http://127.0.0.1:41611/metrics", GaudiExporterSource),
    ],
)
def test_explicit_modes_do_not_probe(gpu, kind):
    source = build_gpu_source(*gpu_args(build({"gpu": gpu})), dcgm_probe=refuse, nvml_probe=refuse, amdsmi_probe=refuse)
    assert isinstance(source, kind)
    if "=" in gpu:
        assert source.target == gpu.partition("=")[2]


@pytest.mark.parametrize("mode, port", [("amd-exporter", 5000), ("ascend-exporter", 8082), ("gaudi-exporter", 41611)])
def test_an_exporter_mode_without_a_url_names_the_usual_one(mode, port):
    from exporter.validation import ConfigError

    with pytest.raises(ConfigError, match=f"{mode}=http://HOST:{port}/metrics"):
        build({"gpu": mode})


def test_none_builds_nothing():
    assert build_gpu_source(*gpu_args(build({"gpu": "none"})), dcgm_probe=refuse, nvml_probe=refuse) is None


def test_auto_prefers_a_dcgm_host_engine_that_answers(caplog):
    caplog.set_level(logging.INFO)
    source = build_gpu_source(*gpu_args(build({"dcgm_address": "10.0.0.9:5555"})), dcgm_probe=YES, nvml_probe=refuse)
    assert isinstance(source, DcgmSource) and source.address == "10.0.0.9:5555"
    assert "auto chose DCGM" in caplog.text


def test_auto_falls_back_to_nvml(caplog):
    caplog.set_level(logging.INFO)
    assert isinstance(build_gpu_source(*gpu_args(build({})), dcgm_probe=NO, nvml_probe=YES), NvmlSource)
    assert "auto chose NVML" in caplog.text and "nothing there" in caplog.text


def test_auto_falls_back_to_amd_smi(caplog):
    caplog.set_level(logging.INFO)
    source = build_gpu_source(*gpu_args(build({})), dcgm_probe=NO, nvml_probe=NO, amdsmi_probe=YES)
    assert isinstance(source, AmdSmiSource)
    assert "auto chose AMD SMI" in caplog.text


def test_auto_with_none_runs_without_gpu_families(caplog):
    caplog.set_level(logging.INFO)
    assert build_gpu_source(*gpu_args(build({})), dcgm_probe=NO, nvml_probe=NO, amdsmi_probe=NO) is None
    assert "auto found no GPU telemetry" in caplog.text and "AMD SMI: nothing there" in caplog.text


def test_the_registry_adds_the_gpu_source():
    sources = build_pipeline(build({"gpu": "dcgm-exporter=http://127.0.0.1:9400/metrics"})).sources
    assert [s.name for s in sources if s.name == "dcgm-exporter"] == ["dcgm-exporter"]


def test_auto_probe_on_this_machine_finds_no_dcgm(monkeypatch):
    from exporter.sources import dcgm_connection as dcgm

    monkeypatch.setattr(dcgm, "host_engine_listening", lambda address, timeout=0.5: False)
    ok, why = dcgm.dcgm_answers("127.0.0.1:1")
    assert not ok and "no DCGM host engine" in why
