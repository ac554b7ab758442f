"""The demo's questions to the processes it started (its exporter, Prometheus, Alertmanager), asked
through the exporter's one HTTP client; an answer that does not come is None, for the screen to say
so, never an exception in the middle of a redraw."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.sources.base import SourceError
from exporter.sources.http_fetch import HttpClient
from exporter.sources.http_get import get_body, get_json


def _client() -> HttpClient:
    """A client for one question, closed after it: the demo asks a few a second on loopback, and a
    session kept for the process would still be open when it exits. Everything it asks is on
    loopback: no proxy or netrc from the environment applies."""
    return HttpClient(trust_env=False)


def text(url: str, timeout_seconds: float) -> str | None:
    client = _client()
    try:
        return get_body(client, url, timeout_seconds).decode("utf-8", errors="replace")
    except SourceError:
        return None
    finally:
        client.close()


def document(url: str, timeout_seconds: float, params: Mapping[str, str] | None = None) -> Any:
    """The JSON document at `url`, or None."""
    client = _client()
    try:
        return get_json(client, url, timeout_seconds, params)
    except (SourceError, ValueError):
        return None
    finally:
        client.close()


def answers(url: str, timeout_seconds: float) -> bool:
    """Whether `url` answers 200."""
    return text(url, timeout_seconds) is not None
