"""Judges one gateway answer to a batch (protocol.md section 4): acknowledged events, retry, or a contract breach.

Pure: it takes the status, the Retry-After header and the body, and says what the sender does next. A 200 whose
body does not add up (wrong batch_id, accepted != sent - rejected, bad indices) is a contract violation, never
counted as acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from loadtest.nodes import Batch

RETRYABLE_4XX = frozenset({408, 429})
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class Acked:
    """The batch is settled: these (seq, event_id) pairs are durably in Kafka; the others were rejected."""

    events: tuple[tuple[int, str], ...]
    rejected: tuple[tuple[int, str], ...]  # (index, code)


@dataclass(frozen=True)
class Retry:
    """Resend the same batch after `delay_s` (None: the sender's own backoff)."""

    reason: str
    delay_s: float | None


@dataclass(frozen=True)
class Refused:
    """The batch is settled without acknowledgement: a 4xx answer or a broken contract (`violation`)."""

    reason: str
    violation: bool


Outcome = Acked | Retry | Refused


def retry_after(header: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds form), capped; None if absent or unparsable."""
    if not header:
        return None
    try:
        value = float(header.strip())
    except ValueError:
        return None
    return min(max(value, 0.0), MAX_RETRY_AFTER_S)


def judge(batch: Batch, status: int, retry_after_header: str | None, body: bytes | None) -> Outcome:
    """What an answer means for `batch`; status 0 is a connection error or timeout (retryable)."""
    if status == 0:
        return Retry("connection error", None)
    if status in RETRYABLE_4XX or status >= 500:
        return Retry(f"HTTP {status}", retry_after(retry_after_header))
    if status == 200:
        return _judge_ok(batch, body)
    if status == 422:
        return Refused("HTTP 422: every event rejected", violation=True)  # our events are valid: a bug somewhere
    return Refused(f"HTTP {status}: {(body or b'')[:200]!r}", violation=status not in (413,))


def _judge_ok(batch: Batch, body: bytes | None) -> Outcome:
    try:
        answer: Any = msgspec.json.decode(body or b"")
    except msgspec.DecodeError:
        return Refused("200 with a body that is not JSON", violation=True)
    if not isinstance(answer, dict):
        return Refused("200 with a body that is not an object", violation=True)
    if answer.get("batch_id") != batch.batch_id:
        return Refused(f"200 for batch_id {answer.get('batch_id')!r}, sent {batch.batch_id}", violation=True)
    rejected = answer.get("rejected", [])
    accepted = answer.get("accepted")
    if not isinstance(rejected, list) or not isinstance(accepted, int) or isinstance(accepted, bool):
        return Refused("200 without an integer 'accepted' and a 'rejected' list", violation=True)
    indices: dict[int, str] = {}
    for item in rejected:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < len(batch.seqs) or index in indices:
            return Refused(f"200 with a bad rejected entry {item!r}", violation=True)
        indices[index] = str(item.get("code", ""))
    if accepted != len(batch.seqs) - len(indices):
        return Refused(f"200 with accepted={accepted} for {len(batch.seqs)} events, {len(indices)} rejected",
                       violation=True)
    events = tuple((seq, eid) for i, (seq, eid) in enumerate(zip(batch.seqs, batch.event_ids, strict=True))
                   if i not in indices)
    return Acked(events, tuple(sorted(indices.items())))
