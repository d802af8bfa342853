"""The disk spool: the store's disk backing, every sealed batch a checksummed file until it is acknowledged.

Write path: a batch is written to a temporary file, fsynced (policy `always`; `never` leaves it to the OS,
which survives a process crash or kill -9 but not a power loss), renamed into `batches/`, and only then
handed to the sender. Acknowledged or permanently rejected batches are unlinked. At start the directory is
scanned: leftover temporary files are removed, an open batch's journal (durability `sync`) becomes a batch
file, every batch file is queued again in seq order, and the producer id comes from `state.json`.

Seqs: `state.json` holds a reservation, a seq above every seq handed out so far, written (and fsynced)
before the seqs below it are used (`reserve`, `RESERVE_AHEAD` at a time). A restarted producer continues
from the reservation (or past the newest file), so a seq returned by `track()` is never handed out again;
after a crash the unused rest of the reservation shows downstream as a gap. A clean `close()` records the
exact next seq, so a clean restart leaves no gap. A file that fails its checksum is moved to `quarantine/`
(the newest 100 are kept) and its events are counted as dropped; it never raises into the application. One
live client owns a spool directory at a time (an advisory `flock` on `lock`). The order, bounds and overflow
policy are the `Store`'s (`_store`), which the pipeline builds over this backing with `recovered`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import IO

from ._batcher import Batch
from ._exceptions import ConfigError, SpoolLockedError
from ._ids import new_producer_id
from ._journal import SUFFIX as JOURNAL_SUFFIX
from ._journal import Journal, read_journal
from ._spoolfile import (
    SUFFIX,
    CorruptFileError,
    decode_batch,
    decode_state,
    encode_batch,
    encode_state,
    file_name,
    fsync_dir,
    parse_name,
    write_atomic,
)
from ._store import Entry, MemoryBacking

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("headwater")
QUARANTINE_KEEP = 100
RESERVE_AHEAD = 8192


class DiskSpool:
    """Pending batches as files in `directory` (a `Backing`), the producer id and the seq reservation.

    `recovered`: the batch files found at start, in seq order, for the store to queue first.
    """

    def __init__(self, directory: str, fsync: bool) -> None:
        self.producer_id = new_producer_id()
        self.next_seq = 0
        self.recovered: list[Entry] = []
        self._state_lock = threading.Lock()  # reserve() and close() write state.json
        self.directory = os.path.abspath(directory)
        self._batches = os.path.join(self.directory, "batches")
        self._quarantine = os.path.join(self.directory, "quarantine")
        self._state_path = os.path.join(self.directory, "state.json")
        self._journals = os.path.join(self.directory, "journal")
        self._fsync = fsync
        self._grouping = False
        self._grouped = 0  # batch files written in the current group
        try:
            for d in (self.directory, self._batches, self._quarantine, self._journals):
                os.makedirs(d, exist_ok=True)
            self._lock_file = _lock(os.path.join(self.directory, "lock"))
            self._persisted_next = 0
            self._recover()
        except SpoolLockedError:
            raise
        except OSError as exc:
            raise ConfigError(f"spool_dir (HEADWATER_SPOOL_DIR) {directory!r} is not usable: {exc}") from None
        self.journal = Journal(self._journals, self.producer_id, fsync)

    def _recover(self) -> None:
        state = self._read_state()
        if state is not None:
            self.producer_id = state[0]
        self._recover_journals()
        files_next = 0
        for name in sorted(os.listdir(self._batches)):
            path = os.path.join(self._batches, name)
            if name.endswith(".tmp"):
                _unlink(path)
                continue
            try:
                first, last, batch_id = parse_name(name)
                size = os.path.getsize(path)
            except (ValueError, OSError):
                self._move_to_quarantine(path)
                continue
            files_next = max(files_next, last + 1)
            self.recovered.append(Entry(batch_id, first, last, last - first + 1, size, path=path))
        if state is None and self.recovered:
            self.producer_id = self._producer_of_files() or new_producer_id()
        self.next_seq = max(state[1] if state else 0, files_next)
        self._write_state(self.next_seq)
        log.info("headwater spool %s: producer %s, next seq %d, %d batch(es) to resend",
                 self.directory, self.producer_id, self.next_seq, len(self.recovered))

    def _recover_journals(self) -> None:
        """Turn each journal left by a crash (durability `sync`) into a batch file."""
        for name in sorted(os.listdir(self._journals)):
            path = os.path.join(self._journals, name)
            if name.endswith(JOURNAL_SUFFIX):
                try:
                    batch = read_journal(path)
                except OSError as exc:
                    log.warning("headwater spool: journal %s unreadable (%s); quarantined", path, exc)
                    self._move_to_quarantine(path)
                    continue
                if batch is not None:
                    write_atomic(os.path.join(self._batches, file_name(batch)), encode_batch(batch), self._fsync)
            _unlink(path)

    def reserve(self, next_seq: int) -> int:
        """Persist a reservation of `RESERVE_AHEAD` seqs from `next_seq` (never lowering the one on disk)."""
        with self._state_lock:
            limit = max(self._persisted_next, next_seq + RESERVE_AHEAD)
            if limit > self._persisted_next:
                self._write_state(limit)
            return limit

    @contextlib.contextmanager
    def group(self) -> Iterator[None]:
        """Batch files written in this block share one directory fsync, at its end (a burst: one, not 125).

        A batch may be sent before that fsync; that loses nothing (it is on its way), and the block ends
        right after its last write, so "in the spool" still holds a moment after the batch was sealed.
        """
        self._grouping, self._grouped = True, 0
        try:
            yield
        finally:
            self._grouping = False
            if self._fsync and self._grouped:
                fsync_dir(self._batches)

    def _read_state(self) -> tuple[str, int] | None:
        try:
            with open(self._state_path, "rb") as f:
                return decode_state(f.read())
        except FileNotFoundError:
            return None
        except (OSError, CorruptFileError) as exc:
            log.warning("headwater spool: state file unusable (%s); quarantined", exc)
            self._move_to_quarantine(self._state_path)
            return None

    def _producer_of_files(self) -> str | None:
        for entry in self.recovered:
            batch = self._read(entry)
            if batch is not None:
                return batch.producer_id
        return None

    def _write_state(self, next_seq: int) -> None:
        write_atomic(self._state_path, encode_state(self.producer_id, next_seq), self._fsync)
        self._persisted_next = next_seq

    def persist(self, batch: Batch) -> Entry:
        """Write `batch` to its file (see `group` for the directory fsync); in memory only if the write fails."""
        data = encode_batch(batch)
        path = os.path.join(self._batches, file_name(batch))
        try:
            write_atomic(path, data, self._fsync, sync_dir=not self._grouping)
            self._grouped += 1
        except OSError as exc:
            log.warning("headwater spool: cannot write %s (%s); batch kept in memory only", path, exc)
            return MemoryBacking().persist(batch)
        if self.journal.batch_id == batch.batch_id:
            self.journal.sealed(batch.batch_id)
        return Entry(batch.batch_id, batch.first_seq, batch.last_seq, len(batch.events), len(data), path=path)

    def _read(self, entry: Entry) -> Batch | None:
        if entry.batch is not None or entry.path is None:
            return entry.batch
        try:
            with open(entry.path, "rb") as f:
                return decode_batch(f.read())
        except (OSError, CorruptFileError) as exc:
            log.warning("headwater spool: %s is unusable (%s); quarantined", entry.path, exc)
            return None

    def load(self, entry: Entry) -> Batch | None:
        """The batch of `entry`; None if its file is unusable (moved to quarantine)."""
        batch = self._read(entry)
        if batch is None and entry.path is not None:
            self._move_to_quarantine(entry.path)
            entry.path = None
        return batch

    def remove(self, entry: Entry) -> None:
        """Unlink the batch file of `entry`, if it has one."""
        if entry.path is not None:
            _unlink(entry.path)

    def _move_to_quarantine(self, path: str) -> None:
        try:
            os.replace(path, os.path.join(self._quarantine, os.path.basename(path)))
            kept = sorted(os.listdir(self._quarantine),
                          key=lambda n: os.path.getmtime(os.path.join(self._quarantine, n)))
            for old in kept[:-QUARANTINE_KEEP]:
                _unlink(os.path.join(self._quarantine, old))
        except OSError as exc:
            log.warning("headwater spool: cannot quarantine %s (%s); deleting it", path, exc)
            _unlink(path)

    def close(self, next_seq: int | None = None) -> None:
        """Record the exact next seq (a clean stop leaves no gap) and release the lock; pending files stay."""
        with self._state_lock:
            if self._lock_file is None:
                return
            self.journal.close()
            try:
                if next_seq is not None:
                    self._write_state(next_seq)
            except OSError as exc:
                log.warning("headwater spool: cannot write the state file (%s)", exc)
            self._lock_file.close()
            self._lock_file = None


def _lock(path: str) -> IO[bytes] | None:
    f = open(path, "ab")  # noqa: SIM115 - held open for the life of the spool
    if fcntl is None:  # type: ignore[comparison-overlap,unused-ignore]
        return f  # type: ignore[unreachable,unused-ignore]
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise SpoolLockedError(f"spool directory {os.path.dirname(path)} is in use by another client") from None
    return f


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("headwater spool: cannot delete %s (%s)", path, exc)


__all__ = ["SUFFIX", "DiskSpool"]
