"""Fixtures shared by the integration tests: a real vLLM CPU engine, the NVML stand-in."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest

from tests import nvml_stub
from tests.integration.vllm_server import VllmServer
from tests.support import free_port

__all__ = ["free_port", "vllm_server"]


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselection sees the items
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses ``vllm_server`` as ``vllm``.

    So ``-m "not vllm"`` always deselects them and no other tier pays for the
    ~3.5 GB install and ~45 s engine startup, even if a test forgot the marker.
    """
    for item in items:
        if "vllm_server" in getattr(item, "fixturenames", ()) and item.get_closest_marker("vllm") is None:
            item.add_marker(pytest.mark.vllm)


@pytest.fixture(scope="session")
def vllm_server() -> Iterator[VllmServer]:
    """One real vLLM server for the session; startup (~45 s) is too costly per test."""
    with VllmServer() as server:
        yield server


@pytest.fixture(scope="module")
def stub_loaded() -> ctypes.CDLL:
    """The NVML stand-in (tests/nvml_stub) built and loaded into this process under the real binding."""
    try:
        lib_dir = nvml_stub.build_stub()
    except nvml_stub.StubUnavailable as exc:
        pytest.fail(f"the NVML stand-in cannot be built: {exc}")
    return nvml_stub.preload(lib_dir)
