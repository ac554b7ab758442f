"""The peers' parser suites as one table: every case of the OpenMetrics project's suite and of
Prometheus' and prometheus/common's parser tests, with what the exporter's reader does with it
(tests/fixtures/exposition-peers: README.md says where each case comes from, expectations.json
what each `expect` means). Valid cases are read as prometheus_client reads them (or as their own
suite states, where it differs); a line neither format allows is dropped and counted, the rest of
the input read as if it were not there; every other invalid case is read for the reason the table
gives, and no value is ever taken from a line the formats refuse."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families as text_families

from exporter.promtext import DECODE_ERRORS, ParsedSamples, WantedParser, text_blocks
from tests.support import FIXTURES

PEERS = FIXTURES / "exposition-peers"
TABLE = json.loads((PEERS / "expectations.json").read_text())
CASES = TABLE["cases"]
# What a mapping that wanted every family of the input would ask for: the names lines start with.
_NAME = re.compile(r"[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*)")
_EOF = re.compile(r"^[ \t]*# EOF", re.MULTILINE)


def body(case: dict) -> str:
    path = PEERS / case["case"]
    data = (path / "metrics" if path.is_dir() else path).read_bytes()
    return data.decode("utf-8", errors=DECODE_ERRORS)  # as the HTTP client decodes a body


def wanted_of(text: str) -> set[str]:
    return {m.group(1) for line in text.split("\n") if (m := _NAME.match(line))}


def read(text: str, wanted: set[str]) -> tuple[ParsedSamples, int]:
    """(the series read, by name, without names that had none; lines counted as malformed)."""
    parser = WantedParser(wanted)
    for block in text_blocks(text):
        if not parser.feed(block):
            break
    return {name: series for name, series in parser.result.items() if series}, parser.malformed


def without(text: str, lines: list[int]) -> str:
    return "\n".join(line for number, line in enumerate(text.split("\n"), 1) if number not in lines)


def comparable(parsed: ParsedSamples) -> dict:
    """NaN never equals itself; compare it as a marker."""
    return {
        name: {labels: "NaN" if math.isnan(value) else value for labels, value in series.items()}
        for name, series in parsed.items()
    }


def reference(case: dict, text: str) -> ParsedSamples:
    """prometheus_client's reading of a valid case (its OpenMetrics parser for an OpenMetrics
    case), or the samples the table gives where it reads otherwise than the case's own suite."""
    if "samples" in case:
        given: ParsedSamples = {}
        for name, labels, value in case["samples"]:
            given.setdefault(name, {})[tuple(sorted(labels.items()))] = value
        return given
    openmetrics = case["case"].startswith("openmetrics/") or "openmetricsparse" in case["case"]
    result: ParsedSamples = {}
    for family in (openmetrics_families if openmetrics else text_families)(text):
        for sample in family.samples:
            result.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = float(sample.value)
    return result


def line_by_line(text: str, wanted: set[str]) -> ParsedSamples:
    """Each line read alone, the later one winning a repeated series: what a reader whose every
    line stands on its own reads of the whole."""
    merged: ParsedSamples = {}
    for line in text.split("\n"):
        for name, series in read(line, wanted)[0].items():
            merged.setdefault(name, {}).update(series)
    return merged


@pytest.mark.parametrize("case", CASES, ids=[case["case"] for case in CASES])
def test_each_peer_case_reads_as_the_table_says(case: dict) -> None:
    text = body(case)
    wanted = wanted_of(text)
    ours, malformed = read(text, wanted)
    expect, lines = case["expect"], case.get("lines", [])
    if expect == "read":
        assert comparable(ours) == comparable(reference(case, without(text, lines)))
        assert malformed == len(lines)
    elif expect == "drop":
        assert lines and malformed == len(lines)
        rest, rest_malformed = read(without(text, lines), wanted)
        assert rest_malformed == 0
        assert comparable(ours) == comparable(rest)  # the line, not the scrape
    elif expect == "after-eof":
        eof = _EOF.search(text)
        assert eof is not None and malformed == 0
        assert ours == read(text[: eof.start()], wanted)[0]
    else:  # read as written (or nothing on the faulty line to take): each line on its own
        assert malformed == 0
        assert comparable(ours) == comparable(line_by_line(text, wanted))
        if expect in ("text-0.0.4", "openmetrics", "type-rule", "order") and ours == {}:
            assert not [line for line in text.split("\n") if _NAME.match(line) and not line.startswith("#")]


def test_the_table_covers_every_case_copied_and_no_valid_case_is_dropped() -> None:
    copied = {str(path.relative_to(PEERS)) for path in PEERS.glob("*/*.txt")}
    copied |= {str(path.relative_to(PEERS)) for path in (PEERS / "openmetrics").iterdir()}
    assert {case["case"] for case in CASES} == copied
    for case in CASES:
        assert case["expect"] in TABLE["expect"]
        upstream_valid = case["upstream"] == "valid"
        assert upstream_valid == (case["expect"] in ("read", "quoted-name")), case["case"]


def test_the_openmetrics_suite_verdicts_are_the_suites_own() -> None:
    for case in CASES:
        if case["case"].startswith("openmetrics/"):
            verdict = json.loads(Path(PEERS / case["case"] / "test.json").read_text())["shouldParse"]
            assert verdict == (case["upstream"] == "valid"), case["case"]
