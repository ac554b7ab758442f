"""The garbage collector, set for a process that lives for months and allocates in rounds.

Every collection round builds thousands of short-lived containers (parsed samples, readings,
label dicts). With CPython's default thresholds a young-generation collection runs every 700 of
them, several a round, and every so often a full collection walks the whole heap, start-up's
modules and classes included, while the HTTP server thread waits for the GIL. So, once, when
`serve` has built its sources:

- `gc.freeze()` moves what start-up built out of every later collection: it never becomes
  garbage, and a full collection then walks only what the rounds keep;
- the young generation holds YOUNG_THRESHOLD objects, so most of a round's containers are freed
  by their reference counts before a collection looks at them.

What this saves is in docs/performance.md (tests/perf/bench_gc.py: the collector's share of the
CPU, its collections and pauses, beside CPython's defaults and a larger young generation, and why
that one is not taken). What it costs: cyclic garbage waits for a larger young generation (a little
more RSS, measured there), and what start-up built that later becomes cyclic garbage (the sources
a reload replaces) is never collected: once, bounded by start-up.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 5_000


def settle_after_start_up() -> None:
    """Freeze what start-up built and widen the young generation (the older ones keep their
    thresholds). For `serve` only: a process that builds and drops exporters (the tests, `once`)
    would freeze what it later drops."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
