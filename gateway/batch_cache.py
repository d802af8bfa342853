"""Answers of recently committed batches shared by the workers of one instance (SQLite in the shared directory),
so that a retry after a lost response is answered from the cache whichever worker SO_REUSEPORT gives it to.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import json
import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from gateway.limits import Answer

log = logging.getLogger("gateway.batch_cache")
PRUNE_EVERY = 1000  # answers written between two prunes of the oldest ones
LOCAL_SIZE = 4096   # this worker's most recent answers, also kept in memory
WAL_SWITCH_S = 30.0  # how long a starting worker tries to open the shared file while the others do
_Row = tuple[str, str, int, str, bytes]


class SharedCommittedBatches:
    """(source, batch_id) -> (status, body, events digest) of the last `size` committed batches, across processes.

    `put` keeps the answer in memory at once and queues it for a writer thread, which writes everything queued in
    one transaction (group commit: one write per batch cost ~0.25 ms of the event loop); `written()` returns once
    what was put before it is in the database, so the handler answers only when every worker can replay the
    batch. A database error (for example a lock held past the busy timeout) degrades to a miss or an unrecorded
    answer, logged: a retry may then be written twice, which the pipeline removes by event_id, but no request
    fails because of the cache.
    """

    def __init__(self, path: Path, size: int, busy_timeout_s: float = 1.0) -> None:
        self.size = size
        self._written = 0
        self._local: collections.OrderedDict[tuple[str, str], Answer] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._queue: list[_Row] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._flushing = False
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="batch-cache")
        self._reader = self._connect(path, busy_timeout_s)
        self._db = self._connect(path, busy_timeout_s)  # the writer thread's
        # answers_v2: with the events digest (a file left by an older gateway keeps its table `answers`, unused)
        self._db.execute("CREATE TABLE IF NOT EXISTS answers_v2 (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "source TEXT NOT NULL, batch_id TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, "
                         "digest BLOB NOT NULL, "
                         "UNIQUE (source, batch_id))")

    @staticmethod
    def _connect(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
        db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        # Workers start together: switching a new file to WAL needs it alone, and SQLite may refuse at once
        # ("database is locked") without waiting out the busy timeout; try again for a while before failing.
        deadline = time.monotonic() + WAL_SWITCH_S
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    db.close()
                    raise
                time.sleep(0.05)
        db.execute("PRAGMA synchronous=OFF")  # a cache: losing it with the machine is harmless
        return db

    def get(self, source: str, batch_id: str) -> Answer | None:
        local = self._local.get((source, batch_id))
        if local is not None:
            return local
        try:
            row = self._reader.execute("SELECT status, body, digest FROM answers_v2 WHERE source = ? AND batch_id = ?",
                                       (source, batch_id)).fetchone()
        except sqlite3.Error as exc:
            log.warning("committed-batch cache read failed: %s", exc)
            return None
        if row is None:
            return None
        body: dict[str, Any] = json.loads(row[1])
        return int(row[0]), body, bytes(row[2])

    def put(self, source: str, batch_id: str, status: int, body: dict[str, Any], digest: bytes) -> None:
        if self.size <= 0:
            return
        self._local[(source, batch_id)] = (status, body, digest)
        while len(self._local) > LOCAL_SIZE:
            self._local.popitem(last=False)
        with self._lock:
            self._queue.append((source, batch_id, status, json.dumps(body), digest))
            self._start_flush()

    async def written(self) -> None:
        """Return once every answer put so far is in the database (shared with the other workers)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if not self._queue and not self._flushing:
                return
            self._waiters.append((loop, fut))
            self._start_flush()
        await fut

    def flush(self) -> None:
        """Write what is queued now (blocking; for tools, tests and shutdown)."""
        self._writer.submit(lambda: None).result()  # after any flush already submitted
        with self._lock:
            rows, self._queue = self._queue, []
        self._write(rows)

    def _start_flush(self) -> None:  # with self._lock held
        if not self._flushing and (self._queue or self._waiters):
            self._flushing = True
            self._writer.submit(self._flush_loop)

    def _flush_loop(self) -> None:
        while True:
            with self._lock:
                rows, self._queue = self._queue, []
                waiters, self._waiters = self._waiters, []
                if not rows and not waiters:
                    self._flushing = False
                    return
            self._write(rows)
            for loop, fut in waiters:
                loop.call_soon_threadsafe(_done, fut)

    def _write(self, rows: list[_Row]) -> None:
        if not rows:
            return
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO answers_v2 (source, batch_id, status, body, digest) "
                                     "VALUES (?, ?, ?, ?, ?)", rows)
                self._written += len(rows)
                if self._written >= PRUNE_EVERY:
                    self._written = 0
                    self._db.execute("DELETE FROM answers_v2 WHERE id <= (SELECT max(id) FROM answers_v2) - ?",
                                     (self.size,))
        except sqlite3.Error as exc:
            log.warning("committed-batch cache write of %d answers failed: %s", len(rows), exc)

    def __len__(self) -> int:
        return int(self._reader.execute("SELECT count(*) FROM answers_v2").fetchone()[0])

    def close(self) -> None:
        self.flush()
        self._writer.shutdown()
        self._reader.close()
        self._db.close()


def _done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
