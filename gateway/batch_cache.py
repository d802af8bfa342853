"""Answers of recently committed batches shared by the workers of one instance (SQLite in the shared directory),
so that a retry after a lost response is answered from the cache whichever worker SO_REUSEPORT gives it to.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

log = logging.getLogger("gateway.batch_cache")
PRUNE_EVERY = 1000  # puts between two prunes of the oldest answers
FLUSH_AFTER_S = 0.01  # answers are written in one transaction per 10 ms (one write per batch cost ~0.25 ms)
LOCAL_SIZE = 4096     # this worker's most recent answers, also kept in memory


class SharedCommittedBatches:
    """(source, batch_id) -> (status, body) of the last `size` committed batches, across processes.

    Same interface as `gateway.limits.CommittedBatches`. A database error (for example a lock held past the busy
    timeout) degrades to a miss or an unrecorded answer, logged: a retry may then be written twice, which the
    pipeline removes by event_id, but no request fails because of the cache.
    """

    def __init__(self, path: Path, size: int, busy_timeout_s: float = 1.0) -> None:
        self.size = size
        self._puts = 0
        self._local: collections.OrderedDict[tuple[str, str], tuple[int, dict[str, Any]]] = collections.OrderedDict()
        self._queue: list[tuple[str, str, int, str]] = []
        self._db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # a cache: losing it with the machine is harmless
        self._db.execute("CREATE TABLE IF NOT EXISTS answers (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "source TEXT NOT NULL, batch_id TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, "
                         "UNIQUE (source, batch_id))")

    def get(self, source: str, batch_id: str) -> tuple[int, dict[str, Any]] | None:
        local = self._local.get((source, batch_id))
        if local is not None:
            return local
        try:
            row = self._db.execute("SELECT status, body FROM answers WHERE source = ? AND batch_id = ?",
                                   (source, batch_id)).fetchone()
        except sqlite3.Error as exc:
            log.warning("committed-batch cache read failed: %s", exc)
            return None
        if row is None:
            return None
        body: dict[str, Any] = json.loads(row[1])
        return int(row[0]), body

    def put(self, source: str, batch_id: str, status: int, body: dict[str, Any]) -> None:
        """Remembered here at once, written for the other workers within FLUSH_AFTER_S."""
        if self.size <= 0:
            return
        self._local[(source, batch_id)] = (status, body)
        while len(self._local) > LOCAL_SIZE:
            self._local.popitem(last=False)
        self._queue.append((source, batch_id, status, json.dumps(body)))
        if len(self._queue) == 1:
            try:
                asyncio.get_running_loop().call_later(FLUSH_AFTER_S, self.flush)
            except RuntimeError:  # no event loop (tools, tests): write now
                self.flush()

    def flush(self) -> None:
        """Write the queued answers in one transaction (and prune the oldest now and then)."""
        rows, self._queue = self._queue, []
        if not rows:
            return
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO answers (source, batch_id, status, body) "
                                     "VALUES (?, ?, ?, ?)", rows)
                self._puts += len(rows)
                if self._puts >= PRUNE_EVERY:
                    self._puts = 0
                    self._db.execute("DELETE FROM answers WHERE id <= (SELECT max(id) FROM answers) - ?",
                                     (self.size,))
        except sqlite3.Error as exc:
            log.warning("committed-batch cache write of %d answers failed: %s", len(rows), exc)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self.flush()
        self._db.close()
