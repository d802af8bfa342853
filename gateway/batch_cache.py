"""Answers of recently committed batches shared by the workers of one instance (SQLite in the shared directory),
so that a retry after a lost response is answered from the cache whichever worker SO_REUSEPORT gives it to.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

log = logging.getLogger("gateway.batch_cache")
PRUNE_EVERY = 1000  # puts between two prunes of the oldest answers


class SharedCommittedBatches:
    """(source, batch_id) -> (status, body) of the last `size` committed batches, across processes.

    Same interface as `gateway.limits.CommittedBatches`. A database error (for example a lock held past the busy
    timeout) degrades to a miss or an unrecorded answer, logged: a retry may then be written twice, which the
    pipeline removes by event_id, but no request fails because of the cache.
    """

    def __init__(self, path: Path, size: int, busy_timeout_s: float = 1.0) -> None:
        self.size = size
        self._puts = 0
        self._db = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")  # a cache: losing it with the machine is harmless
        self._db.execute("CREATE TABLE IF NOT EXISTS answers (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "source TEXT NOT NULL, batch_id TEXT NOT NULL, status INTEGER NOT NULL, body TEXT NOT NULL, "
                         "UNIQUE (source, batch_id))")

    def get(self, source: str, batch_id: str) -> tuple[int, dict[str, Any]] | None:
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
        if self.size <= 0:
            return
        try:
            self._db.execute("INSERT OR REPLACE INTO answers (source, batch_id, status, body) VALUES (?, ?, ?, ?)",
                             (source, batch_id, status, json.dumps(body)))
            self._puts += 1
            if self._puts % PRUNE_EVERY == 0:
                self._db.execute("DELETE FROM answers WHERE id <= (SELECT max(id) FROM answers) - ?", (self.size,))
        except sqlite3.Error as exc:
            log.warning("committed-batch cache write failed: %s", exc)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()
