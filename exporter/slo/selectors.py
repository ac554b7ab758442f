"""Which engines and models an SLO covers: each selector matches exactly, else as a regex.

The regex is RE2 (exporter.validation.linear_regex), as PromQL's `=~` is: matching an engine-chosen
model name costs time linear in the name, whatever the configured pattern, so a nested quantifier
cannot stall the snapshot (and with it `/metrics`), and a selector covers what the same selector
in a PromQL query over the exported series would.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from exporter.settings import SloTarget
from exporter.validation import linear_regex


@lru_cache(maxsize=256)
def _pattern(text: str) -> Any:
    return linear_regex(text)


def _matches(selector: str | None, value: str) -> bool:
    if selector is None or selector == value:
        return True
    # Anchored as PromQL's =~ is: "llama" does not select "codellama-13b".
    return _pattern(selector).fullmatch(value) is not None


def covers(slo: SloTarget, engine: str, model: str) -> bool:
    return _matches(slo.engine, engine) and _matches(slo.model, model)
