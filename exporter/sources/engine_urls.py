"""One engine served at several URLs: its ranks or nodes scraped together and joined.

A multi-node SGLang has a listener per node that hosts a data-parallel group's first rank (its Rust
server, 0.5.23), each showing that node's schedulers; vLLM with external or hybrid load balancing
has an API server per rank or node. Each is one engine: `rank_urls:` names the others beside `url`.
All are fetched at once, each into its own parser (own caps, own line cache); every series keeps
which URL it came from (`rank_url`, the URL's position), so the mapping adds data-parallel ranks
up across URLs as it does within one, and two nodes' tokenizer histograms (same labels, different
requests) add rather than overwrite. A URL that does not answer costs its ranks, not the engine:
it is named as a rank not reporting (`url=…`) while the others are read; only when none answers is
the engine down, with the first URL's reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from exporter.promtext import ParsedSamples, WantedParser
from exporter.sources.base import SourceError

#: the label a joined series carries: the position of its URL among the engine's (0 for `url`)
URL_LABEL = "rank_url"


@dataclass
class Joined:
    """The answered URLs' parses joined, in the shape the engine source reads a parser in."""

    #: wanted names with samples or declared, and malformed lines dropped, over every URL
    present: set[str] = field(default_factory=set)
    malformed: int = 0
    result: ParsedSamples = field(default_factory=dict)
    #: "url=<shown URL>" of each URL that answered, and of each that did not
    answered: list[str] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)
    parsers: list[WantedParser] = field(default_factory=list)

    @property
    def names(self) -> set[str]:
        """The sample names seen at every answered URL, read only when asked (as a parser's are)."""
        return set().union(*(parser.names for parser in self.parsers))


def rank_name(shown_url: str) -> str:
    return f"url={shown_url}"


async def scrape_all(
    scrape: Callable[[str, int], Awaitable[WantedParser]], urls: Sequence[str], shown: Sequence[str]
) -> Joined:
    """Every URL at once (`scrape(url, index)`), joined; SourceError only when none answered."""
    outcomes = await asyncio.gather(*(scrape(url, i) for i, url in enumerate(urls)), return_exceptions=True)
    joined = Joined()
    first_error: BaseException | None = None
    for index, outcome in enumerate(outcomes):
        if isinstance(outcome, BaseException):
            if not isinstance(outcome, SourceError):
                raise outcome
            first_error = first_error or outcome
            joined.silent.append(rank_name(shown[index]))
            continue
        joined.answered.append(rank_name(shown[index]))
        joined.parsers.append(outcome)
        joined.present |= outcome.present
        joined.malformed += outcome.malformed
        tag = (URL_LABEL, str(index))
        for name, series in outcome.result.items():
            into = joined.result.setdefault(name, {})
            for key, value in series.items():
                into[tuple(sorted((*key, tag)))] = value
    if not joined.answered:
        assert first_error is not None
        raise first_error
    return joined
