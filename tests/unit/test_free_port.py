"""tests/support.free_port: two calls never give one port, and the ports it gives lie outside the
range the kernel hands to port-0 binds and outgoing connections."""

from __future__ import annotations

import socket
from collections import deque

import pytest

from tests import support


def _unused_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def test_a_port_handed_out_is_not_handed_out_again_when_picked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = _unused_ports(2)
    picks = [first, first, first, second]
    monkeypatch.setattr(support, "_HANDED_OUT", deque(maxlen=256))
    monkeypatch.setattr(support, "_candidate", lambda: picks.pop(0))
    assert (support.free_port(), support.free_port()) == (first, second)


def test_a_port_something_listens_on_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        taken = listener.getsockname()[1]
        picks = [taken, *_unused_ports(1)]
        monkeypatch.setattr(support, "_HANDED_OUT", deque(maxlen=256))
        monkeypatch.setattr(support, "_candidate", lambda: picks.pop(0))
        assert support.free_port() != taken


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    ports = [support.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    low = support._ephemeral_low()
    if low - support.PICK_FROM >= 4096:  # else the kernel's ports are all there are
        assert all(support.PICK_FROM <= port < low for port in ports), ports
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
