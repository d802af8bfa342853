"""The disk spool: every sealed batch is a checksummed file until the gateway acknowledged it.

Write path: a batch is written to a temporary file, fsynced (policy `always`; `never` leaves it to the OS,
which survives a process crash or kill -9 but not a power loss), renamed into `batches/`, and only then
handed to the sender. Acknowledged or permanently rejected batches are unlinked. At start the directory is
scanned: leftover temporary files are removed, every batch file is queued again in seq order, and the
producer id and next seq come from `state.json` and the file names, so a restarted producer continues its
gapless sequence. A file that fails its checksum is moved to `quarantine/` (the newest 100 are kept) and
its events are counted as dropped; it never raises into the application. One live client owns a spool
directory at a time (an advisory `flock` on `lock`).
"""

from __future__ import annotations

import logging
import os
from typing import IO

from ._batcher import Batch
from ._exceptions import SpoolLockedError
from ._ids import new_producer_id
from ._spoolfile import (
    SUFFIX,
    CorruptFileError,
    decode_batch,
    decode_state,
    encode_batch,
    encode_state,
    file_name,
    parse_name,
    write_atomic,
)
from ._store import DropReporter, Entry, OrderedStore

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory lock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("headwater")
QUARANTINE_KEEP = 100


class DiskSpool(OrderedStore):
    """Pending batches as files in `directory`, bounded by `max_bytes` with an overflow policy."""

    def __init__(self, directory: str, max_bytes: int, overflow: str, fsync: bool, report: DropReporter) -> None:
        super().__init__(1 << 62, max_bytes, overflow, report)
        self.directory = os.path.abspath(directory)
        self._batches = os.path.join(self.directory, "batches")
        self._quarantine = os.path.join(self.directory, "quarantine")
        self._state_path = os.path.join(self.directory, "state.json")
        self._fsync = fsync
        for d in (self.directory, self._batches, self._quarantine):
            os.makedirs(d, exist_ok=True)
        self._lock_file = _lock(os.path.join(self.directory, "lock"))
        self._persisted_next = 0
        self._recover()

    def _recover(self) -> None:
        state = self._read_state()
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
            self._add(Entry(batch_id, first, last, last - first + 1, size, path=path))
        if state is not None:
            self.producer_id = state[0]
        elif self._entries:
            self.producer_id = self._producer_of_files() or new_producer_id()
        self.next_seq = max(state[1] if state else 0, files_next)
        self._write_state(self.next_seq)
        log.info("headwater spool %s: producer %s, next seq %d, %d batch(es) to resend",
                 self.directory, self.producer_id, self.next_seq, len(self._entries))

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
        for entry in self._entries:
            batch = self._read(entry)
            if batch is not None:
                return batch.producer_id
        return None

    def _write_state(self, next_seq: int) -> None:
        write_atomic(self._state_path, encode_state(self.producer_id, next_seq), self._fsync)
        self._persisted_next = next_seq

    def _persist(self, batch: Batch) -> Entry:
        data = encode_batch(batch)
        path = os.path.join(self._batches, file_name(batch))
        try:
            write_atomic(path, data, self._fsync)
        except OSError as exc:
            log.warning("headwater spool: cannot write %s (%s); batch kept in memory only", path, exc)
            return super()._persist(batch)
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

    def _load(self, entry: Entry) -> Batch | None:
        batch = self._read(entry)
        if batch is None:
            if entry.path is not None:
                self._move_to_quarantine(entry.path)
                entry.path = None
            self._drop(entry, "spool_corrupt")
        return batch

    def _remove(self, entry: Entry, newest: bool) -> None:
        if newest and entry.last_seq + 1 > self._persisted_next:
            try:
                self._write_state(max(self.next_seq, entry.last_seq + 1))
            except OSError as exc:
                log.warning("headwater spool: cannot write the state file (%s)", exc)
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

    def close(self) -> None:
        """Persist the next seq and release the directory lock; pending files stay for the next client."""
        with self._cond:
            if self._lock_file is None:
                return
            try:
                if self.next_seq > self._persisted_next:
                    self._write_state(self.next_seq)
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
