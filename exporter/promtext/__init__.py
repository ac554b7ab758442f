"""A fast, strict reader of Prometheus text exposition that extracts only the samples a mapping needs.

Engine payloads are 50 KB or more and a node may scrape eight of them every few seconds;
prometheus_client's parser tokenizes every character of every line in Python. Here each line is
classified by its metric name first, by a regex in C, and only wanted lines are read, by the
grammar of the text format 0.0.4 and OpenMetrics 1.0 together (grammar.py): a wanted line neither
allows is dropped and counted, the rest of the scrape read. parser.py reads a body's blocks as they
stream in, scan.py finds its lines; cache.py keeps what a target's lines parsed to from one scrape to the next.
"""

from exporter.promtext.cache import LINE_CACHE_ENTRIES, LINE_CACHE_HEAD_CHARS, LineCache, ParsedSamples, ScrapePlan
from exporter.promtext.grammar import DECODE_ERRORS, LabelKey, parse_number
from exporter.promtext.parser import (
    DEFAULT_MAX_LABEL_VALUE_LENGTH,
    MALFORMED_LINE,
    MAX_LINE_CHARS,
    DeclaredScan,
    LabelValueTooLong,
    LineTooLong,
    TooManySeries,
    WantedParser,
    parse_wanted,
    text_blocks,
)
from exporter.promtext.scan import MAX_NAMES, NAMES_HEAD_CHARS, sample_names

__all__ = [
    "DECODE_ERRORS",
    "DEFAULT_MAX_LABEL_VALUE_LENGTH",
    "LINE_CACHE_ENTRIES",
    "LINE_CACHE_HEAD_CHARS",
    "MALFORMED_LINE",
    "MAX_LINE_CHARS",
    "MAX_NAMES",
    "NAMES_HEAD_CHARS",
    "DeclaredScan",
    "LabelKey",
    "LabelValueTooLong",
    "LineCache",
    "LineTooLong",
    "ParsedSamples",
    "ScrapePlan",
    "TooManySeries",
    "WantedParser",
    "parse_number",
    "parse_wanted",
    "sample_names",
    "text_blocks",
]
