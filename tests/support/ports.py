"""Free loopback ports for the processes a test starts (never a fixed port: several test sessions share a host)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
