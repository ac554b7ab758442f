"""A simulated inference node: a physically coherent serving model behind the real protocols.

One node's engine replicas (vLLM V1 scheduling over a paged KV cache, steps timed by the roofline),
its GPUs and RDMA NICs, driven by a scenario's workload and phases. It speaks vLLM's /metrics,
dcgm-exporter's /metrics and a sysfs class/infiniband tree, so the exporter reads it through its
ordinary sources (`simulate`, `demo`), and it runs faster than real time for benchmarks and rule
tests (`run_offline`). docs/simulator.md describes the model and the scenario format.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "OfflineResult": "exporter.simulate.offline",
    "WindowSummary": "exporter.simulate.offline",
    "run_offline": "exporter.simulate.offline",
    "Scenario": "exporter.simulate.scenario",
    "builtin_names": "exporter.simulate.scenario",
    "load_scenario": "exporter.simulate.scenario",
    "parse_scenario": "exporter.simulate.scenario",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import on first use: `from exporter.simulate import run_offline` loads the offline runner, not the demo."""
    if name not in _EXPORTS:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
