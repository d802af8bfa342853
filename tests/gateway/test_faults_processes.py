"""Fault tests of processes on the fault suite's private stack, each under load and checked by an independent
Kafka reconciliation (tests/gateway/fault_load.py): a gateway worker and the supervisor killed with SIGKILL, a
registry outage (with a worker restarted during it), lost responses, and a producer killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from stack.config import REPO_ROOT
from stack.launcher import Stack
from stack.services import gateway_service, registry_service
from tests.gateway.fault_load import SCALE, Load, check, reconcile
from tests.gateway.test_faults import _gateway_workers
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration


def _port(env: dict[str, str]) -> int:
    return int(env["GATEWAY_URL"].rsplit(":", 1)[1])


def _readyz(env: dict[str, str]) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(env["GATEWAY_URL"] + "/readyz", timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_worker_kill_9_under_load(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    _, env = fault_stack
    port = _port(env)
    with Load(env) as load:
        load.wait_acked(load.batches * 10)
        victim = _gateway_workers(port)[0][0]
        os.kill(victim, signal.SIGKILL)
        wait_for("the supervisor to replace the worker",
                 lambda: len(w := _gateway_workers(port)) == 2 and victim not in [p for p, _ in w], 60)
        load.finish()
    check(load, reconcile(env, load.producers, load.acked, load.started_ms))


def test_supervisor_kill_9_under_load(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    """The workers notice their supervisor is gone and shut down cleanly; a new gateway takes over."""
    stack, env = fault_stack
    port = _port(env)
    gateway = gateway_service(stack.cfg)
    with Load(env) as load:
        load.wait_acked(load.batches * 10)
        supervisor = gateway.process(stack.cfg).pid()
        assert supervisor is not None
        os.kill(supervisor, signal.SIGKILL)
        try:
            wait_for("the orphaned workers to stop", lambda: not _gateway_workers(port), 60)
        except AssertionError:
            _dump_stacks(stack, [pid for pid, _ in _gateway_workers(port)])
            raise
        gateway.start(stack.cfg, env)
        load.finish()
    check(load, reconcile(env, load.producers, load.acked, load.started_ms))


def _dump_stacks(stack: Stack, pids: list[int]) -> None:
    """Every thread's stack of these workers (faulthandler on SIGUSR1) and the end of the gateway's log."""
    for pid in pids:
        os.kill(pid, signal.SIGUSR1)
    time.sleep(1)
    lines = (stack.cfg.logs_dir / "gateway.log").read_text(errors="replace").splitlines()
    print("\n".join(line for line in lines[-150:] if '"gateway.http"' not in line))


def test_registry_outage_cached_schemas_serve_and_a_restarted_worker_is_warm(
        fault_stack: tuple[Stack, dict[str, str]]) -> None:
    """Issue 14 item 13: ready and serving through a registry outage, even a worker restarted during it (it loads
    its siblings' schema snapshot instead of waiting for the registry)."""
    stack, env = fault_stack
    port = _port(env)
    registry = registry_service(stack.cfg)
    log = stack.cfg.logs_dir / "gateway.log"
    with Load(env) as before:
        before.wait_acked(before.batches * 10)
        registry.process(stack.cfg).stop(30)
        try:
            wait_for("a failed schema refresh", lambda: _readyz(env)[1].get("registry_reachable") is False, 60)
            status, body = _readyz(env)
            assert status == 200 and body["status"] == "ready", body
            before.finish()
            snapshots = log.read_text(errors="replace").count("from the workers' snapshot")
            victim = _gateway_workers(port)[0][0]
            os.kill(victim, signal.SIGKILL)
            wait_for("the replacement worker to load the snapshot",
                     lambda: log.read_text(errors="replace").count("from the workers' snapshot") > snapshots, 60)
            with Load(env) as during:  # both workers serve from cached schemas
                during.finish()
            assert set(during.stats.statuses) == {200}, during.stats
            assert all(_readyz(env)[0] == 200 for _ in range(6))  # whichever worker answers
        finally:
            registry.start(stack.cfg, env)
    check(before, reconcile(env, before.producers, before.acked, before.started_ms))
    check(during, reconcile(env, during.producers, during.acked, during.started_ms))


def test_lost_responses_are_replayed_not_written_twice(fault_stack: tuple[Stack, dict[str, str]]) -> None:
    """Issue 14 item 14: every third answer is lost and the batch sent again, on a new connection (any worker)."""
    _, env = fault_stack
    with Load(env, lose_every=3) as load:
        load.finish()
    print(f"\ncommitted-batch cache hit rate: {load.stats.replayed} of {load.stats.lost} retries after a lost answer")
    assert load.stats.lost > 0 and load.stats.replayed == load.stats.lost
    check(load, reconcile(env, load.producers, load.acked, load.started_ms), max_duplicates=0)


def test_producer_kill_9(fault_stack: tuple[Stack, dict[str, str]], tmp_path: Path) -> None:
    """A producer process killed mid-run: what it was told is committed is in Kafka, and no batch is partial."""
    _, env = fault_stack
    acks = tmp_path / "acks.tsv"
    producer = str(uuid.uuid4())
    started_ms = int(time.time() * 1000)
    proc = subprocess.Popen([sys.executable, "-m", "tests.gateway.fault_producer", str(acks), producer],
                            env={**os.environ, **env}, cwd=REPO_ROOT)
    try:
        wait_for("the producer's acknowledgements",
                 lambda: acks.exists() and len(acks.read_text().splitlines()) >= 100 * SCALE, 120)
    finally:
        proc.kill()
        proc.wait()
    acked = [(p, int(s), e) for p, s, e in (line.split("\t") for line in acks.read_text().splitlines())]
    report = reconcile(env, [producer], acked, started_ms)
    print(f"\nproducer kill -9: acknowledged {report.acknowledged}, found {report.found}, "
          f"stored but unacknowledged {report.unacknowledged_found}")
    assert report.missing == 0 and report.id_mismatches == 0 and report.seq_gaps == 0, report
