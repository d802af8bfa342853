"""Identifiers: time-ordered UUIDv7 event and batch ids, and the derived ids of split batches."""

from __future__ import annotations

import random
import time
import uuid

_NAMESPACE = uuid.UUID("6f1f0c2e-9a10-4b59-8d55-2f6f1d1b9a10")


def uuid7(unix_ms: int | None = None) -> str:
    """A UUIDv7 string (RFC 9562): 48-bit millisecond timestamp, version 7, variant 10, 74 random bits.

    The random bits come from `random` (seeded from os.urandom and reseeded in a forked child by CPython),
    which is several times faster than os.urandom; uniqueness, not secrecy, is what an event id needs.
    """
    ms = time.time_ns() // 1_000_000 if unix_ms is None else unix_ms
    rand = random.getrandbits(74)
    value = (ms & 0xFFFF_FFFF_FFFF) << 80 | 0x7 << 76 | (rand >> 62) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def split_batch_id(batch_id: str, half: int) -> str:
    """The batch id of one half of a split batch: derived, so a crash during a split reuses the same ids."""
    return str(uuid.uuid5(_NAMESPACE, f"{batch_id}/{half}"))


def new_producer_id() -> str:
    """A random producer id (UUIDv4)."""
    return str(uuid.uuid4())


def is_uuid(value: str) -> bool:
    """True if `value` parses as a UUID."""
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True
