"""A free loopback port for a process about to be started (the stack, the benchmarks and the load test's launcher).

Never a fixed port: several stacks, benchmarks and test sessions share a host. The kernel picks a port nothing
listens on now; the caller hands it to the process that binds it soon after.
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now on `host` (the kernel's pick; the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
