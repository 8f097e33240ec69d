"""stack.ports.free_port: the port a local server of the tests or the stacks listens on."""

from __future__ import annotations

import socket

from stack.ports import ephemeral_low, free_port


def test_a_port_chosen_for_a_server_lies_below_the_range_of_outgoing_connections():
    """Regression: the scale-out stack's scheduler health server once failed to listen (its
    healthcheck got 'connection refused') because its port came from the kernel's ephemeral
    range, where any client connection of the starting stack can take it first."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            outgoing = client.getsockname()[1]
    assert outgoing >= ephemeral_low()  # the range the kernel draws outgoing ports from
    for _ in range(50):
        assert 1024 <= free_port() < ephemeral_low()


def test_a_port_is_handed_out_once_and_can_be_bound():
    ports = [free_port() for _ in range(30)]
    assert len(set(ports)) == len(ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_the_preferred_port_is_taken_when_free_and_passed_over_when_something_listens():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", free_port()))
        listener.listen()
        busy = listener.getsockname()[1]
        assert free_port(busy) != busy
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        idle = probe.getsockname()[1]
    assert free_port(idle) == idle
    assert free_port(idle) != idle  # handed out already

