"""A worker whose supervisor is gone stops, even when the supervisor died before the worker finished starting
(it was orphaned for good when it read its parent only once it listened)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from gateway.server import _watch_parent
from tests.support.gateway import gateway_env, start_gateway
from tests.support.ports import free_port


@pytest.mark.unit
def test_the_watcher_notices_a_supervisor_gone_before_it_started() -> None:
    stop = asyncio.Event()
    not_our_parent = os.getppid() + 1  # as if the supervisor died (we were reparented) during our start-up
    asyncio.run(asyncio.wait_for(_watch_parent(not_our_parent, stop), 20))
    assert stop.is_set()


@pytest.mark.integration
def test_a_worker_orphaned_during_start_up_exits() -> None:
    """Registry unreachable: the worker waits for its first schema load; its supervisor is gone: it exits."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    env = gateway_env(f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}",
                      HEADWATER_GATEWAY_REGISTRY_TIMEOUT_S="0.5")
    proc = start_gateway(env, subprocess.PIPE, "--worker", "0", "--supervisor", str(gone.pid))
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    assert b"supervisor gone" in out and b"stopped before serving" in out
