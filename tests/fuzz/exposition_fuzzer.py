"""atheris: Prometheus text from engines, gateways and dcgm-exporter, through the sources that read it.

The first byte picks the source (an engine of a given or detected type, a detected gateway, or
dcgm-exporter); the
rest is split in two payloads collected one after the other, so the second round exercises the
windows (deltas, counter resets, new layouts). Properties: tests/fuzz/properties.py. Seeds: the
real captures in tests/fixtures/engines, tests/fixtures/gateways and tests/fixtures/dcgm-exporter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["exporter"]):
    import exporter.sources.device_exporter as exporter_ingest_module
    import exporter.sources.engine as engine_module
    import exporter.sources.gateway as gateway_module
    from exporter.settings import EngineTarget, GatewayTarget
    from exporter.sources.engine import EngineSource
    from exporter.sources.engines import MAPPINGS as ENGINES
    from exporter.sources.gateway import GatewaySource
    from exporter.sources.gpu_exporters.dcgm_exporter import DcgmExporterSource

from tests.fuzz.harness import run  # noqa: E402
from tests.fuzz.properties import assert_renders_and_parses_back, canned_open_body, collect  # noqa: E402

ENGINE_TYPES = (None, *ENGINES.names())
URL = "http://127.0.0.1:9/metrics"
_payload: list[bytes] = [b""]


# The sources fetch through these names; the harness answers instead of a server. Both stream the
# body (open_body): the engine source, and dcgm-exporter in the shared exporter ingest.
engine_module.open_body = canned_open_body(lambda: _payload[0])
gateway_module.open_body = canned_open_body(lambda: _payload[0])
exporter_ingest_module.open_body = canned_open_body(lambda: _payload[0])


def test_one_input(data: bytes) -> None:
    if not data:
        return
    pick, body = data[0], data[1:]
    source: EngineSource | GatewaySource | DcgmExporterSource
    choice = pick % (len(ENGINE_TYPES) + 2)
    if choice == len(ENGINE_TYPES) + 1:
        source = GatewaySource(GatewayTarget(url=URL, name="g"), 60.0)
    elif choice == len(ENGINE_TYPES):
        source = DcgmExporterSource(URL)
    else:
        engine_type = ENGINE_TYPES[choice]
        source = EngineSource(
            EngineTarget(url=URL, name="e", type=engine_type, model="m" if engine_type == "tgi" else None), 60.0
        )
    # Without a split the whole input is collected twice: a second round with equal counters.
    cut = body.find(b"\n\n\n")
    rounds = (body, body) if cut < 0 else (body[:cut], body[cut + 3 :])
    metrics, statuses = [], []
    for now, payload in zip((0.0, 5.0), rounds):
        _payload[0] = payload
        metrics, status = collect(source, now)
        statuses = [status]
    assert_renders_and_parses_back(metrics, statuses)


if __name__ == "__main__":
    run(test_one_input)
