"""The open batch's journal (durability `sync`): each accepted event is appended before `track()` returns.

File `journal/<batch_id>.hwj`: `b"HWJ1"`, header length (u32 BE), a JSON header `{"producer_id"}`, then one
record per event: payload length (u32 BE), CRC-32 of seq + envelope (u32 BE), seq (u64 BE), envelope. When the
batch is sealed its batch file is written and the journal deleted; after a crash, `read_journal` returns
every whole record (a torn last record is ignored: its `track()` had not returned).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import zlib
from typing import IO

from ._batcher import Batch

MAGIC = b"HWJ1"
SUFFIX = ".hwj"
_LEN = struct.Struct(">I")
_REC = struct.Struct(">IIQ")


class Journal:
    """Appends events of the open batch to its journal file, one file per open batch."""

    def __init__(self, directory: str, producer_id: str, fsync: bool) -> None:
        self.directory = directory
        self._producer = json.dumps({"producer_id": producer_id}).encode()
        self._fsync = fsync
        self._file: IO[bytes] | None = None
        self.batch_id: str | None = None

    def append(self, batch_id: str, seq: int, data: bytes) -> None:
        """Append one event of the open batch `batch_id` (starting its file if it is new); durable on return."""
        if batch_id != self.batch_id:
            self.close()
            self._file = open(os.path.join(self.directory, batch_id + SUFFIX), "wb")  # noqa: SIM115
            self._file.write(MAGIC + _LEN.pack(len(self._producer)) + self._producer)
            self.batch_id = batch_id
        assert self._file is not None
        body = struct.pack(">Q", seq) + data
        self._file.write(_REC.pack(len(data), zlib.crc32(body), seq) + data)
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def sealed(self, batch_id: str) -> None:
        """The batch `batch_id` is now in its batch file: delete its journal."""
        if batch_id == self.batch_id:
            self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.directory, batch_id + SUFFIX))

    def close(self) -> None:
        """Close the open journal file (it stays on disk until its batch is sealed)."""
        if self._file is not None:
            self._file.close()
        self._file = None
        self.batch_id = None


def read_journal(path: str) -> Batch | None:
    """The batch of whole records in a journal file; None if it holds none (or no readable header)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != MAGIC or len(data) < 8:
        return None
    (hlen,) = _LEN.unpack_from(data, 4)
    try:
        producer_id = str(json.loads(data[8:8 + hlen])["producer_id"])
    except (ValueError, KeyError, TypeError):
        return None
    pos, seqs, events = 8 + hlen, [], []
    while pos + _REC.size <= len(data):
        n, crc, seq = _REC.unpack_from(data, pos)
        body = data[pos + _REC.size:pos + _REC.size + n]
        if len(body) < n or zlib.crc32(struct.pack(">Q", seq) + body) != crc:
            break  # torn or corrupt tail: everything after it was never acknowledged to a caller
        seqs.append(seq)
        events.append(body)
        pos += _REC.size + n
    if not events:
        return None
    batch_id = os.path.basename(path)[: -len(SUFFIX)]
    return Batch(batch_id, producer_id, min(seqs), max(seqs), tuple(events))
