"""SDK producers for the cluster fault tests: Python SDK clients (one producer id each) sending paced events through
HAProxy, recording what each acknowledged and every HTTP status they saw; and the reconciliation of their
acknowledgements with Kafka (read_committed) through loadtest's Tally and scan.

Events per fault: HEADWATER_CLUSTER_EVENTS (default 30,000, as `make test` and `make test-cluster` run them), times
HEADWATER_CHAOS_SCALE (`make chaos-cluster` sets more).
"""

from __future__ import annotations

import collections
import os
import threading
import time
import uuid
from typing import Any

import headwater

from loadtest.kafka_scan import scan
from loadtest.reconcile import Report, Tally
from stack.topics import EVENTS_TOPIC
from tests.support.events import page_view_properties
from tests.support.wait import wait_for

# What must never happen: an event dropped, a batch refused, an event rejected.
FATAL = (headwater.EventsDroppedError, headwater.BatchRejectedError, headwater.EventRejectedError)
SCALE = max(1, int(os.environ.get("HEADWATER_CHAOS_SCALE", "1")))
EVENTS_PER_FAULT = max(1000, int(os.environ.get("HEADWATER_CLUSTER_EVENTS", "30000"))) * SCALE


class CountingTransport:
    """The SDK's own urllib3 transport, counting every answer's status (and transport errors by kind)."""

    def __init__(self, inner: headwater.Urllib3Transport, counts: collections.Counter[Any], lock: threading.Lock,
                 timeline: list[tuple[float, Any]]) -> None:
        self.inner = inner
        self.counts = counts
        self.lock = lock
        self.timeline = timeline

    def send(self, request: headwater.Request, timeout: float) -> headwater.Response:
        try:
            resp = self.inner.send(request, timeout)
        except headwater.TransportError as exc:
            self._count(type(exc).__name__)
            raise
        self._count(resp.status)
        return resp

    def _count(self, outcome: Any) -> None:
        with self.lock:
            self.counts[outcome] += 1
            self.timeline.append((time.monotonic(), outcome))

    def close(self) -> None:
        self.inner.close()


def page_view(i: int, run: str) -> dict[str, Any]:
    """The page_view properties this fleet tracks (tests/support/events.py's, with its own user agent)."""
    return page_view_properties(i, run, user_agent="headwater-cluster-test", load_time_ms=12.5)


class Fleet:
    """`producers` SDK clients, each tracking `events // producers` events at `rate / producers` events/s."""

    def __init__(self, env: dict[str, str], events: int = EVENTS_PER_FAULT, producers: int = 4,
                 rate: float = 100_000.0) -> None:
        self.env = env
        self.run = uuid.uuid4().hex
        self.per_producer = events // producers
        self.interval_s = producers / rate
        self.started_ms = int(time.time() * 1000)
        self.lock = threading.Lock()
        self.statuses: collections.Counter[Any] = collections.Counter()
        self.timeline: list[tuple[float, Any]] = []
        self.delivered: list[tuple[str, int, int]] = []   # (producer_id, first_seq, last_seq)
        self.event_ids: dict[tuple[str, int], str] = {}
        self.errors: list[Exception] = []
        self.closed_ok: list[bool] = []
        self.producer_ids: list[str] = []
        self._stop = threading.Event()
        # While set, producers keep tracking past their count (at the same pace): the load outlasts a slow fault.
        self.keep_going = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True) for _ in range(producers)]

    def __enter__(self) -> Fleet:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def _client(self) -> headwater.Client:
        transport = CountingTransport(headwater.Urllib3Transport(max_age_s=5.0, maxsize=4), self.statuses,
                                      self.lock, self.timeline)
        return headwater.Client(
            self.env["GATEWAY_URL"], self.env["HEADWATER_WRITE_KEY"], linger_s=0.25, max_queue_events=200_000,
            max_pending_batches=20_000, retry_base_s=0.2, retry_max_s=2.0, retry_deadline_s=900,
            connection_max_age_s=5.0, request_timeout_s=20, transport=transport,
            on_delivery=self._delivered, on_error=self._error)

    def _delivered(self, report: headwater.DeliveryReport) -> None:
        with self.lock:
            self.delivered.append((report.producer_id, report.first_seq, report.last_seq))
            self.errors.extend(report.rejected)

    def _error(self, err: Exception) -> None:
        with self.lock:
            self.errors.append(err)

    def _produce(self) -> None:
        client = self._client()
        with self.lock:
            self.producer_ids.append(client.producer_id)
        next_at = time.monotonic()
        i = 0
        while (i < self.per_producer or self.keep_going.is_set()) and not self._stop.is_set():
            event_id = str(uuid.uuid4())
            seq = client.track("page_view", page_view(i, self.run), event_id=event_id, partition_key=f"k-{i % 64}")
            if seq is not None:
                with self.lock:
                    self.event_ids[(client.producer_id, seq)] = event_id
            i += 1
            next_at += self.interval_s
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        ok = client.close(timeout=600)
        with self.lock:
            self.closed_ok.append(ok)

    # --- what the test waits on and checks -------------------------------------------------------------------
    def acknowledged(self) -> int:
        with self.lock:
            return sum(last - first + 1 for _, first, last in self.delivered)

    def wait_acked(self, count: int, timeout_s: float = 300.0) -> None:
        wait_for(f"{count} acknowledged events "
                 f"(have {self.acknowledged()}; statuses {dict(self.statuses)})",
                 lambda: self.acknowledged() >= count, timeout_s)

    def finish(self, timeout_s: float = 600.0) -> None:
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self._threads), f"producers unfinished: {dict(self.statuses)}"

    def outcomes_since(self, since: float) -> collections.Counter[Any]:
        with self.lock:
            return collections.Counter(outcome for t, outcome in self.timeline if t >= since)

    def reconcile(self) -> Report:
        """Acknowledged / found / missing / duplicates / seq gaps of this fleet's events in the events topic."""
        tally = Tally()
        with self.lock:
            for producer, first, last in self.delivered:
                for seq in range(first, last + 1):
                    tally.ack(producer, seq, self.event_ids[(producer, seq)])
            producers = set(self.producer_ids)
        for found in scan(self.env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, self.env["REGISTRY_URL"],
                          since_ms=self.started_ms - 5000, producers=producers):
            tally.stored(found)
        return tally.report()

    def check(self, what: str) -> Report:
        """The oracle: every event acknowledged, none missing, no seq gap, no seq under two ids, nothing rejected."""
        self.finish()
        report = self.reconcile()
        print(f"\n{what}: statuses {dict(self.statuses)} -> acknowledged {report.acknowledged}, found {report.found}, "
              f"lost {report.missing}, duplicates {report.duplicates}, seq gaps {report.seq_gaps}")
        fatal = [e for e in self.errors if isinstance(e, FATAL)]  # outage notices (TransportError) are expected
        assert not fatal, fatal[:3]
        assert all(self.closed_ok) and len(self.closed_ok) == len(self._threads), self.closed_ok
        assert report.acknowledged == len(self.event_ids) >= self.per_producer * len(self._threads), report
        assert report.missing == 0 and report.id_mismatches == 0 and report.seq_gaps == 0, report
        return report
