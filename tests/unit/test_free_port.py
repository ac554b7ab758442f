"""tests/support.free_port: two calls never give one port, even where the kernel would."""

from __future__ import annotations

import socket
from collections import deque

import pytest

from tests import support


class _Recycling:
    """A socket whose bind to port 0 gets the ports in `ports`, one a bind, as a kernel that gives
    the port just released to the next bind does."""

    ports: list[int] = []

    def __init__(self, *args: object) -> None:
        self._port = 0

    def __enter__(self) -> _Recycling:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self._port = self.ports.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self._port)


def test_a_port_handed_out_is_not_handed_out_again_when_the_kernel_repeats_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(support, "_HANDED_OUT", deque(maxlen=256))
    monkeypatch.setattr(_Recycling, "ports", [40001, 40001, 40001, 40002])
    monkeypatch.setattr(support.socket, "socket", _Recycling)
    assert (support.free_port(), support.free_port()) == (40001, 40002)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = [support.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
