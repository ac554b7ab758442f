import pytest

from tests.support import RouteServer


@pytest.fixture
def route_server():
    server = RouteServer()
    yield server
    server.close()
