from collections.abc import Iterator

import pytest

from tests.raw_server import RawServer
from tests.support import RouteServer


@pytest.fixture
def route_server():
    server = RouteServer()
    yield server
    server.close()


@pytest.fixture
def served() -> Iterator[list[RawServer]]:
    """Raw-socket servers a test starts (tests/raw_server.py), closed after it."""
    servers: list[RawServer] = []
    yield servers
    for server in servers:
        server.close()
