"""Process-wide hooks: flush every open client at interpreter exit, and rebuild them in a forked child."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._client import Client

log = logging.getLogger("headwater")
# Strong references: a client dropped without close() still has running threads and queued events,
# and must still be flushed at exit. close() unregisters it.
_clients: set[Client] = set()


class _Registry:
    lock = threading.Lock()




def register(client: Client) -> None:
    """Track an open client for the exit and fork hooks."""
    with _Registry.lock:
        _clients.add(client)


def unregister(client: Client) -> None:
    """Stop tracking a closed client."""
    with _Registry.lock:
        _clients.discard(client)


def close_all() -> None:
    """At exit: close every open client, each bounded by its own `exit_timeout_s` (a flush, not a join)."""
    with _Registry.lock:
        clients = list(_clients)
    for client in clients:
        try:
            client.close(client.config.exit_timeout_s)
        except Exception:
            log.exception("headwater: closing a client at exit failed")


def _after_fork_in_child() -> None:
    _Registry.lock = threading.Lock()  # the parent may have held it while forking
    for client in list(_clients):
        try:
            client._after_fork()
        except Exception:
            log.exception("headwater: restarting a client after fork failed")


atexit.register(close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
