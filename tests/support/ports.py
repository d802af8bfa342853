"""Free loopback ports for the processes a test starts (never a fixed port: several test sessions share a host)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; the caller binds it soon after)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def refused_port() -> Iterator[int]:
    """A port held bound but never listening for the block's length: every connection to it is refused (nothing
    else can take it meanwhile, unlike a `free_port` that was let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])
