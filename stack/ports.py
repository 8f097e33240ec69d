"""A free TCP port for a local server that the caller starts next (throw-away PostgreSQL,
moto, the local Airflow services and their health and log servers)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

#: where Linux keeps the range of local ports it gives outgoing connections
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: how far below that range a port is chosen (and the range used where it cannot be read)
SPAN = 10_000
FALLBACK_LOW = 32768

_handed_out: set[int] = set()


def ephemeral_low() -> int:
    """The lowest port the kernel gives an outgoing connection."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_LOW


def _bindable(port: int, host: str) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(preferred: int | None = None, host: str = "127.0.0.1") -> int:
    """`preferred` when it can be bound, else a free port below the kernel's ephemeral range.

    Not the kernel's own choice (binding port 0): that comes from the range every outgoing
    connection draws its local port from, so between this check and the server's bind any
    client connection of a busy stack could take it, and the server fails to listen. Below
    the range only another listener can, and each port is handed out once per process.
    """
    if preferred and preferred not in _handed_out and _bindable(preferred, host):
        _handed_out.add(preferred)
        return preferred
    low = ephemeral_low()
    start = max(1024, low - SPAN)
    draw = random.SystemRandom()
    for _ in range(200):
        port = draw.randrange(start, low)
        if port not in _handed_out and _bindable(port, host):
            _handed_out.add(port)
            return port
    raise OSError(f"no free port on {host} in {start}..{low - 1}")
