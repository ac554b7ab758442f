"""atheris: arbitrary bytes as the configuration file and as the web configuration file.

Both loaders must raise nothing but ConfigError (which `serve` turns into exit 2 naming the key,
and a SIGHUP reload into "keep the running configuration"). The first byte picks the loader.
Seeds (given by tests/integration/test_fuzz_atheris.py): docs/example-config.yaml and a web config.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["exporter"]):
    from exporter.config import ConfigError, build
    from exporter.config import load_file as load_config_file
    from exporter.webconfig import load_web_config

from tests.fuzz.harness import run  # noqa: E402

_handle, PATH = tempfile.mkstemp(suffix=".yaml", prefix="config-fuzzer-")
os.close(_handle)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    Path(PATH).write_bytes(data[1:])
    try:
        if data[0] % 2:
            load_web_config(PATH)
        else:
            build(load_config_file(PATH))
    except ConfigError:
        pass


if __name__ == "__main__":
    try:
        run(test_one_input)
    finally:
        os.unlink(PATH)
