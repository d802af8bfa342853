"""Locust entry point: each user multiplexes a group of simulated Headwater nodes over one keep-alive connection.

Run it with `make loadtest` (headless, one process) or `make loadtest-distributed` (master plus workers);
loadtest/README.md lists the settings. Per process, the nodes of this worker (a slice of all nodes) sit in a
pool; a user checks out its group on start and returns it on stop, pending batch included, so a node's seq
stays gapless even when users come and go with the load shape. Every answer is judged by `checks.judge`;
acknowledged events are appended to the process's ack file for the reconciliation.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent  # type: ignore[import-untyped]
from locust import FastHttpUser, LoadTestShape, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from loadtest import checks
from loadtest.events import EventFactory
from loadtest.nodes import Batch, BatchBuilder, Node, NodePool, Schedule, nodes_per_user, worker_indices
from loadtest.runlog import AckLog, Manifest
from loadtest.settings import LoadSettings
from loadtest.shapes import PLANS, Tick

log = logging.getLogger("headwater.loadtest")
SETTINGS = LoadSettings.from_env()
HEADERS = {"Authorization": f"Bearer {SETTINGS.write_key}", "Content-Type": "application/json",
           "Content-Encoding": "zstd", "User-Agent": "headwater-loadtest/0.1.0 (python/locust)"}
ACK_NAME = "batch acknowledged (incl. retries)"
BACKOFF_BASE_S, BACKOFF_CAP_S = 0.5, 10.0

_PLAN = PLANS[SETTINGS.shape](SETTINGS.users, SETTINGS.duration_s, SETTINGS.spawn_rate)


class HeadwaterShape(LoadTestShape):
    """Follows the plan HEADWATER_LT_SHAPE names (soak, ramp, spike, steps) with the run's users and duration."""

    def tick(self) -> Tick:
        return _PLAN(time.perf_counter() - self.start_time)


@dataclass
class ProcessState:
    """What one locust process shares between its users."""

    pool: NodePool
    per_user: int
    builder: BatchBuilder
    acks: AckLog
    refused_batches: int = 0
    retries: int = 0
    max_lag_s: float = 0.0
    acked_events: int = 0
    rejected_events: int = 0


class _Process:
    """This process's shared state, set when the test starts (None on a master)."""

    state: ProcessState | None = None


def _listen(hook: Any, handler: Callable[..., None]) -> None:
    hook.add_listener(handler)


def _worker(environment: Environment) -> tuple[int, int]:
    """(this process's worker index, worker count): (0, 1) for a local run."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        return runner.worker_index, SETTINGS.workers
    return 0, 1


def _on_test_start(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner) or environment.runner is None:
        _write_manifest()
        return
    index, workers = _worker(environment)
    if index >= workers:
        raise RuntimeError(f"worker index {index} but HEADWATER_LT_WORKERS={workers}: set it to the worker count")
    if not isinstance(environment.runner, WorkerRunner):
        _write_manifest()
    pool = NodePool(SETTINGS.run_id, worker_indices(SETTINGS.nodes, workers, index))
    per_user = nodes_per_user(pool.size, math.ceil(SETTINGS.users / workers))
    builder = BatchBuilder(EventFactory(seed=SETTINGS.seed + index), SETTINGS.zstd_level)
    _Process.state = ProcessState(pool, per_user, builder, AckLog(SETTINGS.run_dir, index))
    log.info("worker %d/%d: %d nodes, %d per user, one batch of %d events per node every %.2fs", index, workers,
             pool.size, per_user, SETTINGS.batch_events, SETTINGS.interval_s)


def _write_manifest() -> None:
    s = SETTINGS
    Manifest(run_id=s.run_id, started_at_ms=int(time.time() * 1000), nodes=s.nodes, rate=s.rate,
             batch_events=s.batch_events, users=s.users, workers=s.workers, duration_s=s.duration_s,
             shape=s.shape, gateway_url=s.gateway_url).write(s.run_dir)


def _on_test_stop(environment: Environment, **_: Any) -> None:
    state = _Process.state
    if state is None:
        return
    state.acks.flush()
    log.info("acked events %d, rejected %d, refused batches %d, retries %d, max lag %.2fs, acks in %s",
             state.acked_events, state.rejected_events, state.refused_batches, state.retries, state.max_lag_s,
             state.acks.path)


def _on_quitting(environment: Environment, **_: Any) -> None:
    if _Process.state is not None:
        _Process.state.acks.close()
    if isinstance(environment.runner, WorkerRunner):
        return
    # Retryable answers (503/429, connection errors) are expected under load; only broken contracts fail the run.
    violations = [e for e in environment.stats.errors.values() if str(e.error).startswith("contract")]
    environment.process_exit_code = 1 if violations else 0


_listen(events.test_start, _on_test_start)
_listen(events.test_stop, _on_test_stop)
_listen(events.quitting, _on_quitting)


class NodeFleet(FastHttpUser):
    """One connection carrying the batches of many nodes, each node on its own schedule."""

    host = SETTINGS.gateway_url
    concurrency = 1
    network_timeout = 30.0
    connection_timeout = 10.0
    max_retries = 0
    # An https gateway's certificate is verified, as an SDK does (locust's default skips it): the system store, or
    # HEADWATER_CA_BUNDLE (stack.env names a secure stack's private CA).
    insecure = False
    ssl_context_factory = staticmethod(lambda **_: gevent.ssl.create_default_context(cafile=SETTINGS.ca_bundle or None))

    def on_start(self) -> None:
        self.state = _Process.state
        if self.state is None:
            raise RuntimeError("test_start did not run in this process")
        self.nodes: list[Node] = self.state.pool.checkout(self.state.per_user)
        self.schedule = Schedule(len(self.nodes), SETTINGS.interval_s, time.monotonic(), random.random())

    def on_stop(self) -> None:
        if self.state is not None and self.nodes:
            self.state.pool.checkin(self.nodes)
            self.nodes = []

    def wait_time(self) -> float:
        return max(0.0, self.schedule.due() - time.monotonic()) if self.nodes else 3600.0

    @task
    def send(self) -> None:
        now = time.monotonic()
        if not self.nodes or self.schedule.due() > now + 0.001:
            return  # not yet due (first call after start): wait_time sleeps until it is
        node = self.nodes[self.schedule.advance(now)]
        if self.state is not None:
            self.state.max_lag_s = max(self.state.max_lag_s, self.schedule.lag_s)
            self._deliver(self.state, node)

    def _deliver(self, state: ProcessState, node: Node) -> None:
        """Send the node's batch until it is settled, honouring Retry-After; the batch never changes."""
        batch = state.builder.next_batch(node, SETTINGS.batch_events)
        attempt = 0
        while True:
            outcome = self._post(batch)
            if isinstance(outcome, checks.Acked):
                state.acks.record(node.producer_id, outcome.events)
                state.acked_events += len(outcome.events)
                state.rejected_events += len(outcome.rejected)
                node.pending = None
                self.environment.events.request.fire(
                    request_type="ACK", name=ACK_NAME, response_time=(time.monotonic() - batch.first_sent) * 1000,
                    response_length=len(outcome.events), exception=None, context={})
                return
            if isinstance(outcome, checks.Refused):
                state.refused_batches += 1
                node.pending = None  # settled: these seqs will never be acknowledged
                return
            attempt += 1
            state.retries += 1
            delay = outcome.delay_s
            if delay is None:
                delay = random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** min(attempt, 10)))
            gevent.sleep(delay)

    def _post(self, batch: Batch) -> checks.Outcome:
        # geventhttpclient sends bytes as they are; locust's annotation of `data` is narrower than what it takes.
        body: Any = batch.body
        with self.client.post("/v1/batch", data=body, headers=HEADERS, catch_response=True) as resp:
            headers = resp.headers or {}
            outcome = checks.judge(batch, resp.status_code or 0, headers.get("Retry-After"), resp.content)
            if isinstance(outcome, checks.Acked):
                resp.success()
            elif isinstance(outcome, checks.Retry):
                resp.failure(f"retryable: {outcome.reason}")
            else:
                resp.failure(f"{'contract' if outcome.violation else 'refused'}: {outcome.reason}")
        return outcome
