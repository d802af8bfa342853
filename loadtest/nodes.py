"""Simulated producer nodes: identity, gapless seq, the pending batch kept for retries, and the pool users share.

A node's producer_id is derived from the run id and its node id (uuid5), so every locust worker, and the
reconciliation afterwards, computes the same ids without talking to each other. A node builds its next batch
only once the previous one is settled (acknowledged or refused for good); until then the same bytes (same
batch_id, same seqs) are resent, so seq stays gapless however often a batch is retried or whichever user
(connection) sends it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

import msgspec
import zstandard

from loadtest.events import EventFactory, uuid7

SDK = {"name": "headwater-loadtest", "version": "0.1.0"}
NODE_PREFIX = "lt-node-"


def node_id(index: int) -> str:
    return f"{NODE_PREFIX}{index:07d}"


def producer_id(run_id: str, index: int) -> str:
    """The node's stable producer id for this run: uuid5(run id, node id)."""
    return str(uuid.uuid5(uuid.UUID(run_id), node_id(index)))


def worker_indices(nodes: int, workers: int, worker_index: int) -> range:
    """The node indices one worker process owns: a contiguous slice, the slices covering 0..nodes-1 once."""
    if not 0 <= worker_index < workers:
        raise ValueError(f"worker index {worker_index} is outside 0..{workers - 1}")
    per, extra = divmod(nodes, workers)
    start = worker_index * per + min(worker_index, extra)
    return range(start, start + per + (1 if worker_index < extra else 0))


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch as sent: the compressed body and, per event, what an acknowledgement records."""

    batch_id: str
    body: bytes
    seqs: tuple[int, ...]
    event_ids: tuple[str, ...]
    raw_bytes: int  # JSON size before compression
    first_sent: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class Node:
    """One simulated producer: its ids, the next seq to assign, and the batch awaiting its answer."""

    index: int
    node_id: str
    producer_id: str
    next_seq: int = 0
    pending: Batch | None = None


class BatchBuilder:
    """Turns a node's next `size` events into a zstd-compressed JSON batch (protocol.md section 2)."""

    def __init__(self, factory: EventFactory, zstd_level: int = 3) -> None:
        self._factory = factory
        self._compressor = zstandard.ZstdCompressor(level=zstd_level)
        self._encoder = msgspec.json.Encoder()

    def next_batch(self, node: Node, size: int, now_ms: int | None = None) -> Batch:
        """The node's pending batch if it has one (a retry), else a new one taking the next `size` seqs."""
        if node.pending is not None:
            return node.pending
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        seqs = tuple(range(node.next_seq, node.next_seq + size))
        events = [self._factory.event(node.producer_id, node.node_id, seq, ms) for seq in seqs]
        batch_id = uuid7(ms)
        raw = self._encoder.encode({"batch_id": batch_id, "sent_at": ms, "sdk": SDK, "events": events})
        batch = Batch(batch_id=batch_id, body=self._compressor.compress(raw), seqs=seqs,
                      event_ids=tuple(e["event_id"] for e in events), raw_bytes=len(raw))
        node.next_seq += size
        node.pending = batch
        return batch


class NodePool:
    """The nodes of one locust process; each user checks out a disjoint group and returns it when it stops."""

    def __init__(self, run_id: str, indices: range) -> None:
        self._free: list[Node] = [Node(i, node_id(i), producer_id(run_id, i)) for i in reversed(indices)]
        self.size = len(indices)

    def checkout(self, count: int) -> list[Node]:
        """Up to `count` nodes no other user holds (nodes returned earlier come back first, with their state)."""
        taken = self._free[-count:] if count > 0 else []
        del self._free[len(self._free) - len(taken):]
        taken.reverse()
        return taken

    def checkin(self, nodes: list[Node]) -> None:
        self._free.extend(reversed(nodes))

    @property
    def free(self) -> int:
        return len(self._free)


def nodes_per_user(process_nodes: int, process_users: int) -> int:
    """How many nodes each user multiplexes so that `process_users` users cover all `process_nodes` nodes."""
    return -(-process_nodes // max(1, process_users))


class Schedule:
    """When a user sends next: its nodes take turns, each sending one batch per `interval_s`, evenly spaced.

    If the user falls behind (slow answers, retries) it sends at once until it has caught up; `lag_s` says by
    how much the latest send was late, so a run can tell whether its users kept up with the offered load.
    """

    def __init__(self, count: int, interval_s: float, start: float, phase: float) -> None:
        self.spacing = interval_s / max(1, count)
        self._count = max(1, count)
        self._start = start + phase * self.spacing
        self._turn = 0
        self.lag_s = 0.0

    def due(self) -> float:
        """Monotonic time at which the next turn is due."""
        return self._start + self._turn * self.spacing

    def advance(self, now: float) -> int:
        """Take the next turn at `now`; the index (0..count-1) of the node whose turn it is."""
        self.lag_s = max(0.0, now - self.due())
        slot = self._turn % self._count
        self._turn += 1
        return slot

