"""A whole body fetched and waited for: the sync callers of the one HTTP client.

The collection awaits its fetches on the shared event loop; a few callers outside it ask one thing
and wait for the answer (the report's Prometheus client, the demo asking its exporter, Prometheus
and Alertmanager how things stand). They get the same client and the same promises as every scrape
(one deadline over everything, a byte cap on the decoded body, redirects only by the client's rule)
rather than a second HTTP library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from exporter.sources import event_loop
from exporter.sources.http_fetch import ACCEPT_TEXT, HttpClient, open_body

ACCEPT_JSON = "application/json"
#: what a caller that names no cap may read: an API answer or an exposition, never a stream
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


def get_body(
    client: HttpClient,
    url: str,
    timeout_seconds: float,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    accept: str = ACCEPT_TEXT,
    params: Mapping[str, str] | None = None,
) -> bytearray:
    """The body of a 200 answer to GET `url`; SourceError (with its reason) otherwise. Not from the
    event loop's own thread."""

    async def read() -> bytearray:
        async with open_body(client, url, timeout_seconds, max_bytes, accept, params=params) as body:
            return await body.read()

    return event_loop.run(read())


def get_json(client: HttpClient, url: str, timeout_seconds: float, params: Mapping[str, str] | None = None) -> Any:
    """The JSON document of a 200 answer; SourceError for the fetch, ValueError for the document."""
    return json.loads(get_body(client, url, timeout_seconds, accept=ACCEPT_JSON, params=params))
