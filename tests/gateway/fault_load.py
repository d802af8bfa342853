"""Load and oracle for the fault suite: producer threads that retry a batch until it is acknowledged (as the SDK
does), optionally losing responses, and an independent reconciliation of their acknowledgements with Kafka
(read_committed) by producer_id and seq, through loadtest.reconcile's Tally.

Counts scale with HEADWATER_CHAOS_SCALE (1 in `make test`; `make chaos` sets it higher).
"""

from __future__ import annotations

import collections
import os
import threading
import time
import urllib.error
import uuid
from dataclasses import dataclass, field
from typing import Any

from loadtest.kafka_scan import scan
from loadtest.reconcile import Report, Tally
from stack.topics import EVENTS_TOPIC
from tests.gateway.helpers import batch, dumps, http_post, json_headers, page_view, zstd

SCALE = max(1, int(os.environ.get("HEADWATER_CHAOS_SCALE", "1")))
EVENTS_PER_BATCH = 10


@dataclass
class LoadStats:
    """What the producers saw."""

    statuses: collections.Counter[Any] = field(default_factory=collections.Counter)
    replayed: int = 0
    lost: int = 0
    slowest_answer_s: float = 0.0


class Load:
    """`clients` producer threads, each sending `batches` batches of EVENTS_PER_BATCH events in seq order.

    A batch is re-sent (same batch_id, same events) after any non-200 answer or transport error, until it is
    acknowledged or the load is stopped. With `lose_every=n`, every n-th acknowledged answer is dropped as if
    lost on the way and the batch is sent again.
    """

    def __init__(self, env: dict[str, str], clients: int = 4, batches: int = 15 * SCALE, lose_every: int = 0,
                 timeout_s: float = 30.0) -> None:
        self.env = env
        self.marker = uuid.uuid4().hex
        self.producers = [str(uuid.uuid4()) for _ in range(clients)]
        self.batches = batches
        self.lose_every = lose_every
        self.timeout_s = timeout_s
        self.started_ms = int(time.time() * 1000)
        self.acked: list[tuple[str, int, str]] = []
        self.stats = LoadStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(p,), daemon=True) for p in self.producers]

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def acknowledged(self) -> int:
        with self._lock:
            return len(self.acked)

    def wait_acked(self, count: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.acknowledged() < count:
            assert time.monotonic() < deadline, f"only {self.acknowledged()} of {count} events acknowledged"
            time.sleep(0.05)

    def finish(self, timeout_s: float = 180.0 * SCALE) -> None:
        """Wait for every client to have all its batches acknowledged."""
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
        assert not any(t.is_alive() for t in self._threads), f"clients unfinished: {self.stats}"

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout_s + 5)

    def _client(self, producer: str) -> None:
        headers = json_headers(self.env["HEADWATER_WRITE_KEY"])
        url = self.env["GATEWAY_URL"] + "/v1/batch"
        answered = 0
        for b in range(self.batches):
            events = [page_view(b * EVENTS_PER_BATCH + i, self.marker, producer_id=producer)
                      for i in range(EVENTS_PER_BATCH)]
            body = zstd(dumps(batch(*events)))
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    status, _, hdrs = http_post(url, body, headers, timeout=self.timeout_s)
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
                    self._count(type(exc).__name__, time.monotonic() - t0)
                    time.sleep(0.1)
                    continue
                self._count(status, time.monotonic() - t0)
                if status != 200:
                    time.sleep(0.1 if status == 503 else 0.5)
                    continue
                answered += 1
                with self._lock:
                    self.stats.replayed += hdrs.get("X-Headwater-Replayed") == "true"
                    if self.lose_every and answered % self.lose_every == 0:
                        self.stats.lost += 1
                        continue  # the answer was "lost": send the same batch again
                    self.acked.extend((producer, e["seq"], e["event_id"]) for e in events)
                break
            if self._stop.is_set():
                return

    def _count(self, outcome: Any, seconds: float) -> None:
        with self._lock:
            self.stats.statuses[outcome] += 1
            self.stats.slowest_answer_s = max(self.stats.slowest_answer_s, seconds)


def reconcile(env: dict[str, str], producers: list[str], acked: list[tuple[str, int, str]],
              since_ms: int) -> Report:
    """Acknowledged / found / missing / duplicates of these producers' events in the events topic."""
    tally = Tally()
    for producer, seq, event_id in acked:
        tally.ack(producer, seq, event_id)
    for found in scan(env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, env["REGISTRY_URL"], since_ms=since_ms - 5000,
                      producers=set(producers)):
        tally.stored(found)
    return tally.report()


def check(load: Load, report: Report, *, max_duplicates: int | None = None) -> None:
    """The oracle: nothing acknowledged is missing, no event stored under two ids, no hole in a producer's seqs
    (a batch is in Kafka entirely or not at all)."""
    print(f"\n{load.stats} -> acknowledged {report.acknowledged}, found {report.found}, missing {report.missing}, "
          f"duplicates {report.duplicates}, seq gaps {report.seq_gaps}")
    assert report.acknowledged > 0
    assert report.missing == 0 and report.id_mismatches == 0, report
    assert report.seq_gaps == 0, report
    if max_duplicates is not None:
        assert report.duplicates <= max_duplicates, report
