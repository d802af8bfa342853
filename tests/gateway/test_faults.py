"""Fault tests on a private stack (own broker, registry and 2-worker gateway): broker stop, kill -9 and SIGSTOP,
gateway kill -9, each under load and checked by an independent Kafka reconciliation (tests/gateway/fault_load.py).
Process faults of the gateway itself, the registry, lost responses and producers: test_faults_processes.py."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from common.avro_frame import body_of
from stack.launcher import Stack
from stack.services import gateway_service
from stack.topics import EVENTS_TOPIC
from tests.gateway.fault_load import Load, check, reconcile
from tests.gateway.helpers import batch, dumps, http_post, json_headers, page_view, zstd
from tests.support.kafka import consume_all
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration


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
    text = " ".join(body_of(r.value() or b"").decode(errors="replace")
                    for r in consume_all(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, "read_committed", 2))
    assert recovered["event_id"] in text
    assert not [e for e in refused if e in text], "an event answered 503 became visible"


def test_gateway_kill_9_under_load_loses_no_acknowledged_event(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    stack, env = fault_stack
    gateway = gateway_service(stack.cfg)
    with Load(env) as load:
        load.wait_acked(load.batches * 10)
        gateway.process(stack.cfg).kill()  # supervisor and workers, no clean shutdown
        time.sleep(1)
        gateway.start(stack.cfg, env)  # same transactional ids: fences the dead producers
        load.finish()
    check(load, reconcile(env, load.producers, load.acked, load.started_ms))


def test_broker_kill_9_under_load_loses_no_acknowledged_event(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    stack, env = fault_stack
    with Load(env) as load:
        load.wait_acked(load.batches * 10)
        stack.kafka.kill()
        wait_for("503 answers while the broker is dead", lambda: load.stats.statuses[503] >= 4, 60)
        stack.kafka.start()
        load.finish()
    assert load.stats.statuses[503] >= 4
    check(load, reconcile(env, load.producers, load.acked, load.started_ms))
    assert not _raw_librdkafka_lines(stack)


def test_hung_broker_answers_503_before_the_sdk_times_out(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    """SIGSTOP of the broker: batches queued behind the failed transaction get their 503 at once (issue 14
    item 12), so every answer comes well within the SDK's 10 s request timeout; then SIGCONT and recovery."""
    stack, env = fault_stack
    pid = stack.kafka.node(1).process.pid()
    assert pid is not None
    with Load(env, clients=6) as load:
        load.wait_acked(load.batches * 10)
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for("503 answers while the broker is hung", lambda: load.stats.statuses[503] >= 12, 90)
        finally:
            os.kill(pid, signal.SIGCONT)
        load.finish()
    assert load.stats.slowest_answer_s < 10.0, load.stats  # the SDK's request timeout
    check(load, reconcile(env, load.producers, load.acked, load.started_ms))


def _raw_librdkafka_lines(stack: Stack) -> list[str]:
    """Lines of the gateway's log written by librdkafka itself (`%3|...|FAIL|...`) instead of our JSON logger."""
    log = stack.cfg.logs_dir / "gateway.log"
    return [line for line in log.read_text(errors="replace").splitlines() if line.startswith("%")]


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
