"""Unit tests of simulated nodes: ids, worker slices, gapless seq across users and retries, batches, schedule."""

from __future__ import annotations

import random
import uuid

import msgspec
import pytest
import zstandard

from loadtest.events import EventFactory
from loadtest.nodes import BatchBuilder, Node, NodePool, Schedule, node_id, nodes_per_user, producer_id, worker_indices

pytestmark = pytest.mark.unit
RUN = "11111111-1111-4111-8111-111111111111"


def test_producer_ids_are_stable_distinct_uuids() -> None:
    ids = [producer_id(RUN, i) for i in range(1000)]
    assert len(set(ids)) == 1000
    assert ids[7] == producer_id(RUN, 7) != producer_id(str(uuid.uuid4()), 7)
    assert node_id(42) == "lt-node-0000042"


@pytest.mark.parametrize(("nodes", "workers"), [(100_000, 1), (100_000, 3), (10, 4), (7, 7), (5, 8)])
def test_worker_slices_cover_every_node_once(nodes: int, workers: int) -> None:
    seen = [i for w in range(workers) for i in worker_indices(nodes, workers, w)]
    assert seen == list(range(nodes))


def test_worker_index_out_of_range() -> None:
    with pytest.raises(ValueError, match="outside"):
        worker_indices(10, 2, 2)


def test_nodes_per_user_covers_the_pool() -> None:
    assert nodes_per_user(100_000, 200) == 500
    assert nodes_per_user(1001, 10) == 101
    assert nodes_per_user(5, 0) == 5


def test_batch_body_is_a_zstd_json_batch_of_the_nodes_next_seqs() -> None:
    builder = BatchBuilder(EventFactory(seed=1))
    node = Node(3, node_id(3), producer_id(RUN, 3))
    batch = builder.next_batch(node, 40, now_ms=1_795_313_484_990)
    body = msgspec.json.decode(zstandard.ZstdDecompressor().decompress(batch.body, max_output_size=1 << 22))
    assert body["batch_id"] == batch.batch_id and body["sent_at"] == 1_795_313_484_990
    assert [e["seq"] for e in body["events"]] == list(range(40)) == list(batch.seqs)
    assert [e["event_id"] for e in body["events"]] == list(batch.event_ids)
    assert {e["producer_id"] for e in body["events"]} == {node.producer_id}
    assert len(batch.body) < batch.raw_bytes  # compressed
    assert node.next_seq == 40 and node.pending is batch


def test_a_pending_batch_is_resent_unchanged() -> None:
    builder = BatchBuilder(EventFactory(seed=1))
    node = Node(0, node_id(0), producer_id(RUN, 0))
    first = builder.next_batch(node, 5)
    assert builder.next_batch(node, 5) is first  # a retry: same batch_id, same seqs, same bytes
    node.pending = None
    assert builder.next_batch(node, 5).seqs == (5, 6, 7, 8, 9)


def test_seq_stays_gapless_per_node_across_users_retries_and_user_churn() -> None:
    """Users multiplex nodes, retry some batches, stop (returning nodes mid-retry) and are replaced."""
    rng = random.Random(1)
    pool = NodePool(RUN, range(60))
    builder = BatchBuilder(EventFactory(seed=2))
    acked: dict[str, list[int]] = {}
    users = [pool.checkout(10) for _ in range(5)]
    assert pool.free == 10
    for _ in range(3000):
        u = rng.randrange(len(users))
        if not users[u]:
            continue
        node = users[u][rng.randrange(len(users[u]))]
        batch = builder.next_batch(node, rng.randint(1, 40))
        outcome = rng.random()
        if outcome < 0.7:  # 200: acknowledged
            acked.setdefault(node.producer_id, []).extend(batch.seqs)
            node.pending = None
        elif outcome < 0.98:  # 503 / connection error: stays pending, resent later by whoever holds the node
            pass
        else:  # the user stops; its nodes, pending batches included, go back; a new user takes a group
            pool.checkin(users[u])
            users[u] = pool.checkout(10)
    for user in users:  # end of run: settle what is pending
        for node in user:
            if node.pending is not None:
                acked.setdefault(node.producer_id, []).extend(node.pending.seqs)
                node.pending = None
    assert len(acked) > 40
    for seqs in acked.values():
        assert seqs == list(range(len(seqs)))  # in order, no gap, no repeat


def test_checkout_never_hands_a_node_to_two_users() -> None:
    pool = NodePool(RUN, range(25))
    groups = [pool.checkout(10), pool.checkout(10), pool.checkout(10)]
    assert [len(g) for g in groups] == [10, 10, 5]
    held = [n.index for g in groups for n in g]
    assert sorted(held) == list(range(25))
    pool.checkin(groups[0])
    assert [n.index for n in pool.checkout(3)] == [n.index for n in groups[0][:3]]


def test_schedule_spaces_nodes_evenly_and_reports_lag() -> None:
    schedule = Schedule(count=4, interval_s=10.0, start=100.0, phase=0.5)
    assert schedule.spacing == 2.5
    assert schedule.due() == pytest.approx(101.25)
    slots = [schedule.advance(schedule.due()) for _ in range(9)]
    assert slots == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    assert schedule.lag_s == 0.0
    late = schedule.due() + 3.0
    schedule.advance(late)
    assert schedule.lag_s == pytest.approx(3.0)
