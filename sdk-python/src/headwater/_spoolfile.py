"""The spool's on-disk formats: checksummed batch files, the producer state file, and atomic writes.

Batch file `batches/<first_seq:020>-<last_seq:020>-<batch_id>.hwb`:
`b"HWB1"`, payload length (u32 BE), CRC-32 of the payload (u32 BE), payload. The payload is a length-prefixed
(u32 BE) JSON header `{"batch_id", "producer_id", "first_seq", "last_seq"}` followed by each event's JSON
envelope, each length-prefixed. The seq range is also in the name, so a corrupt file still tells which seqs
it held. State file `state.json`: `{"producer_id", "next_seq", "crc"}` (crc over the two values).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from typing import NamedTuple

from ._batcher import Batch

MAGIC = b"HWB1"
SUFFIX = ".hwb"
_HEAD = struct.Struct(">4sII")
_LEN = struct.Struct(">I")


class CorruptFileError(Exception):
    """A spool file failed its checksum or could not be parsed."""


class FileName(NamedTuple):
    """What a batch file's name says."""

    first_seq: int
    last_seq: int
    batch_id: str


def file_name(batch: Batch) -> str:
    """The file name of a batch; names sort in seq order."""
    return f"{batch.first_seq:020d}-{batch.last_seq:020d}-{batch.batch_id}{SUFFIX}"


def parse_name(name: str) -> FileName:
    """Parse a batch file name; raises ValueError if it is not one."""
    if not name.endswith(SUFFIX):
        raise ValueError(name)
    first, last, batch_id = name[: -len(SUFFIX)].split("-", 2)
    return FileName(int(first), int(last), batch_id)


def encode_batch(batch: Batch) -> bytes:
    """The bytes of a batch file."""
    header = json.dumps({"batch_id": batch.batch_id, "producer_id": batch.producer_id,
                         "first_seq": batch.first_seq, "last_seq": batch.last_seq}).encode()
    parts = [_LEN.pack(len(header)), header]
    for event in batch.events:
        parts.append(_LEN.pack(len(event)))
        parts.append(event)
    payload = b"".join(parts)
    return _HEAD.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def decode_batch(data: bytes) -> Batch:
    """Parse a batch file; raises CorruptFileError on a bad magic, length, checksum or structure."""
    if len(data) < _HEAD.size:
        raise CorruptFileError("truncated header")
    magic, length, crc = _HEAD.unpack_from(data)
    payload = data[_HEAD.size:]
    if magic != MAGIC or length != len(payload) or zlib.crc32(payload) != crc:
        raise CorruptFileError("bad magic, length or checksum")
    try:
        chunks = _split(payload)
        header = json.loads(chunks[0])
        return Batch(str(header["batch_id"]), str(header["producer_id"]), int(header["first_seq"]),
                     int(header["last_seq"]), tuple(chunks[1:]))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptFileError(f"bad structure: {exc}") from exc


def _split(payload: bytes) -> list[bytes]:
    chunks: list[bytes] = []
    pos = 0
    while pos < len(payload):
        (n,) = _LEN.unpack_from(payload, pos)
        pos += _LEN.size
        if pos + n > len(payload):
            raise ValueError("chunk past the end")
        chunks.append(payload[pos:pos + n])
        pos += n
    return chunks


def encode_state(producer_id: str, next_seq: int) -> bytes:
    """The bytes of the state file."""
    crc = zlib.crc32(f"{producer_id}:{next_seq}".encode())
    return json.dumps({"producer_id": producer_id, "next_seq": next_seq, "crc": crc}).encode()


def decode_state(data: bytes) -> tuple[str, int]:
    """(producer_id, next_seq) from the state file; raises CorruptFileError if it does not check out."""
    try:
        doc = json.loads(data)
        producer_id, next_seq, crc = str(doc["producer_id"]), int(doc["next_seq"]), int(doc["crc"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptFileError(f"unreadable state file: {exc}") from exc
    if zlib.crc32(f"{producer_id}:{next_seq}".encode()) != crc or next_seq < 0:
        raise CorruptFileError("state file checksum mismatch")
    return producer_id, next_seq


def write_atomic(path: str, data: bytes, fsync: bool, sync_dir: bool = True) -> None:
    """Write `path` via a temporary file and a rename; with `fsync`, file and directory reach the disk first.

    `sync_dir=False` leaves the directory's fsync to the caller (one for a group of files).
    """
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync and sync_dir:
        fsync_dir(os.path.dirname(path))


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename or unlink in it is durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
