"""Binds the unix socket a local proxy connects to: connections on it are the proxy's (the file's permissions
authenticate them), so their X-Forwarded-For is believed (gateway/connections.py)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path


def bind_proxy_socket(path: str) -> socket.socket:
    """The unix socket a local proxy connects to (mode 0660: its owner and group; the folder decides the rest).
    A socket file left by a killed gateway is replaced; any other file at `path` is an error."""
    target = Path(path)
    if target.exists() and not stat.S_ISSOCK(target.stat().st_mode):
        raise OSError(f"HEADWATER_GATEWAY_PROXY_SOCKET={path!r} exists and is not a socket")
    target.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o117)  # created 0660, never briefly wider
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(1024)
    return sock
