"""Which engines and models an SLO covers: each selector matches exactly, else as a regex."""

from __future__ import annotations

import re
from functools import lru_cache

from exporter.settings import SloTarget


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _matches(selector: str | None, value: str) -> bool:
    if selector is None or selector == value:
        return True
    # Anchored as PromQL's =~ is: "llama" does not select "codellama-13b".
    return _pattern(selector).fullmatch(value) is not None


def covers(slo: SloTarget, engine: str, model: str) -> bool:
    return _matches(slo.engine, engine) and _matches(slo.model, model)
