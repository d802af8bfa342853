"""Where a new subscription starts: the position a `Last-Event-ID` names (checked against the log), or the one
`from=` asks for, and the partitions whose records before it were deleted by retention (a `gap`)."""

from __future__ import annotations

from subscribe.errors import BadRequest
from subscribe.hub import Hub
from subscribe.position import Cursor, Start, covers
from subscribe.ring import Ring

Gaps = list[dict[str, int]]


async def resolve(hub: Hub, ring: Ring, resume: Cursor | None, start: Start) -> tuple[Cursor, Gaps]:
    topic, partitions = ring.topic, ring.partitions
    if resume is None and start == "latest":
        return ring.tail, []
    if resume is not None and covers(resume, ring.base) and covers(ring.tail, resume):
        return resume, []  # inside what the reader has read: valid by construction, no look-up
    low, high = await hub.watermarks(topic, partitions)
    if resume is None:
        if start == "earliest":
            return low, []
        assert isinstance(start, int)
        return await hub.offsets_at(topic, partitions, start, high), []
    if any(c > h for c, h in zip(resume, high, strict=True)):
        raise BadRequest("Last-Event-ID is past the end of the stream (was the topic re-created?)",
                         code="invalid_last_event_id")
    gaps = [{"partition": p, "from": c, "to": lo} for p, (c, lo) in enumerate(zip(resume, low, strict=True))
            if c < lo]
    return tuple(max(c, lo) for c, lo in zip(resume, low, strict=True)), gaps
