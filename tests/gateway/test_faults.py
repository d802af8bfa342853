"""Fault tests on a private stack (own broker, registry and gateway): broker down and back, kill -9 under load."""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stack.config import StackConfig
from stack.launcher import Stack
from stack.services import gateway_service
from stack.topics import EVENTS_TOPIC
from tests.conftest import free_port
from tests.gateway.helpers import batch, dumps, http_post, json_headers, page_view, zstd
from tests.kafka_helpers import consume_all

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fault_stack(tmp_path_factory: pytest.TempPathFactory,
                stack_env: dict[str, str]) -> Iterator[tuple[Stack, dict[str, str]]]:
    # `stack_env` first: the session stack must be up before this fixture changes the environment below,
    # or it would start with this module's short timeouts and single worker.
    cfg = StackConfig.from_env({
        "HEADWATER_STATE_DIR": str(tmp_path_factory.mktemp("fault-stack")),
        "HEADWATER_KAFKA_PORT": str(free_port()), "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()),
        "HEADWATER_REGISTRY_PORT": str(free_port()), "HEADWATER_GATEWAY_PORT": str(free_port()),
        "HEADWATER_EVENTS_PARTITIONS": "2", "HEADWATER_KAFKA_HEAP_MB": "512",
    })
    mp = pytest.MonkeyPatch()
    # Short Kafka timeouts so that a dead broker turns into 503s within seconds.
    mp.setenv("HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S", "3")
    mp.setenv("HEADWATER_GATEWAY_TRANSACTION_TIMEOUT_S", "6")
    mp.setenv("HEADWATER_GATEWAY_WORKERS", "1")
    stack = Stack(cfg)
    try:
        yield stack, stack.up().env
    finally:
        stack.down()
        mp.undo()


def _send(env: dict[str, str], events: list[dict[str, Any]]) -> tuple[int, Any, dict[str, str]]:
    return http_post(env["GATEWAY_URL"] + "/v1/batch", zstd(dumps(batch(*events))),
                     json_headers(env["HEADWATER_WRITE_KEY"]), timeout=60)


def test_broker_down_gives_503_nothing_visible_then_recovers(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    stack, env = fault_stack
    marker = uuid.uuid4().hex
    assert _send(env, [page_view(0, marker)])[0] == 200
    stack.kafka.stop()
    refused = []
    try:
        for i in range(3):
            ev = page_view(10 + i, marker)
            status, body, headers = _send(env, [ev])
            assert status == 503 and body["code"] in ("kafka_unavailable", "overloaded"), body
            assert int(headers["Retry-After"]) >= 1
            refused.append(ev["event_id"])
    finally:
        stack.kafka.start()
    deadline = time.monotonic() + 90
    recovered = page_view(99, marker)
    while True:
        status, body, _ = _send(env, [recovered])
        if status == 200:
            break
        assert status == 503, body
        assert time.monotonic() < deadline, "the gateway did not recover after the broker came back"
        time.sleep(1)
    text = " ".join((r.value() or b"")[5:].decode(errors="replace")
                    for r in consume_all(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, "read_committed", 2))
    assert recovered["event_id"] in text
    assert not [e for e in refused if e in text], "an event answered 503 became visible"


def test_kill_9_under_load_loses_no_acknowledged_event(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    stack, env = fault_stack
    marker = uuid.uuid4().hex
    acked: list[str] = []
    stop = threading.Event()
    lock = threading.Lock()

    def client(n: int) -> None:
        seq = 0
        while not stop.is_set():
            events = [page_view(seq + i, marker) for i in range(10)]
            seq += 10
            try:
                status, _, _ = _send(env, events)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.05)
                continue
            if status == 200:
                with lock:
                    acked.extend(e["event_id"] for e in events)

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(3)
    gateway = gateway_service(stack.cfg)
    gateway.process(stack.cfg).kill()
    stop.set()
    for t in threads:
        t.join(30)
    with lock:
        acknowledged = list(acked)
    assert len(acknowledged) >= 50, "too little load reached the gateway before the kill"
    visible = " ".join((r.value() or b"")[5:].decode(errors="replace")
                       for r in consume_all(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, "read_committed",
                                            len(acknowledged)))
    lost = [e for e in acknowledged if e not in visible]
    assert not lost, f"{len(lost)} of {len(acknowledged)} acknowledged events are not in Kafka"
    # A restarted gateway (same transactional id) fences the dead one and serves again.
    gateway.start(stack.cfg, env)
    assert _send(env, [page_view(0, marker)])[0] == 200


def _gateway_workers(port: int) -> list[tuple[int, int]]:
    """(pid, parent pid) of every `python -m gateway --worker` process serving `port`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"gateway" in cmdline and b"--worker" in cmdline and f"HEADWATER_GATEWAY_PORT={port}".encode() in environ:
            found.append((int(proc.name), ppid))
    return found


def test_supervisor_restarts_a_worker_killed_with_sigkill(stack_env: dict[str, str]) -> None:
    """The session stack runs 2 workers: kill -9 one; the supervisor replaces it and the gateway keeps serving."""
    port = int(stack_env["GATEWAY_URL"].rsplit(":", 1)[1])
    workers = _gateway_workers(port)
    assert len(workers) == 2, workers
    victim, supervisor = workers[0]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = _gateway_workers(port)
        if len(now) == 2 and victim not in [pid for pid, _ in now]:
            break
        time.sleep(0.2)
    now = _gateway_workers(port)
    assert len(now) == 2 and victim not in [pid for pid, _ in now], now
    assert all(parent == supervisor for _, parent in now)
    assert Path(f"/proc/{supervisor}").exists()
    marker = uuid.uuid4().hex
    statuses = {_send(stack_env, [page_view(i, marker)])[0] for i in range(10)}  # reaches both workers
    assert statuses == {200}
