"""Both regions mirror each other: events sent through one region's gateway with the Python SDK are read in the
other as `<region>.headwater.events` (read_committed), decoded with that region's registry (the follower resolves
ids through the mirrored `a._schemas`); an aborted transaction is never copied; the mirror lag is printed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from common.kafka_read import read_to_end
from stack.regions import Regions
from tests.regions.flows import mirror_once, translated_offsets
from tests.support.kafka import end_offsets

pytestmark = pytest.mark.integration


def test_events_from_a_are_read_and_decoded_in_b(regions: tuple[Regions, dict[str, str]]) -> None:
    """Region a's events in b, decoded by b's registry: it serves a's ids from the mirrored `a._schemas`."""
    profile, env = regions
    mirror_once(profile, "a", "b", env["HEADWATER_WRITE_KEY"])


def test_events_from_b_are_read_and_decoded_in_a(regions: tuple[Regions, dict[str, str]]) -> None:
    """The reverse flow: b's gateways write with ids of the primary's registry, which a's registry serves."""
    profile, env = regions
    mirror_once(profile, "b", "a", env["HEADWATER_WRITE_KEY"])


def test_an_aborted_transaction_is_not_mirrored(regions: tuple[Regions, dict[str, str]]) -> None:
    """MM2 reads read_committed: a record of an aborted transaction in a never reaches b, even read uncommitted,
    while the committed record written after it on the same partition does."""
    profile, _ = regions
    a, b = profile.stack("a").cfg, profile.stack("b").cfg
    run = uuid.uuid4().hex
    aborted, committed = f"regions-aborted-{run}".encode(), f"regions-committed-{run}".encode()
    start = end_offsets(b.bootstrap, "a.headwater.events")
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": f"regions-test-{run}"})
    producer.init_transactions(30)
    for value, finish in ((aborted, producer.abort_transaction), (committed, producer.commit_transaction)):
        producer.begin_transaction()
        producer.produce("headwater.events", value=value, partition=0)
        producer.flush(30)
        finish(30)
    deadline = time.monotonic() + 60
    values: list[bytes] = []
    while committed not in values and time.monotonic() < deadline:
        values = [m.value() or b"" for m in read_to_end(b.bootstrap, "a.headwater.events", start=start,
                                                        committed=False, timeout_s=30)]
        time.sleep(0.5)
    assert committed in values, "the committed record was not mirrored within 60 s"
    assert aborted not in values, "MirrorMaker 2 copied a record of an aborted transaction"


def test_the_follower_region_has_no_schemas_topic_of_its_own(regions: tuple[Regions, dict[str, str]]) -> None:
    """b's registry process was started on `a._schemas` (never with write intent on a `_schemas` of b's own, which b
    lacks) and given the primary's URL; a's was not; b serves exactly a's schema ids."""
    profile, env = regions
    b = profile.stack("b")
    pid = b.registry_process(1).pid()
    assert pid is not None
    started_with = dict(item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0")
                        if "=" in item)
    assert started_with["SCHEMAS_TOPIC"] == "a._schemas"
    assert started_with["REGISTRY_PRIMARY_URL"] == profile.stack("a").cfg.registry_url
    a_pid = profile.stack("a").registry_process(1).pid()
    assert "REGISTRY_PRIMARY_URL=" not in Path(f"/proc/{a_pid}/environ").read_text()
    assert env["SCHEMAS_TOPIC_B"] == "a._schemas" and env["SCHEMAS_TOPIC_A"] == "_schemas"
    topics = set(AdminClient({"bootstrap.servers": b.cfg.bootstrap}).list_topics(timeout=10).topics)
    assert "_schemas" not in topics and "a._schemas" in topics
    assert b.schema_ids() == profile.stack("a").schema_ids()
    assert env["HEADWATER_ENDPOINTS"].split(",") == [profile.stack(n).cfg.gateway_url for n in ("a", "b")]


def test_a_consumer_groups_offsets_are_translated_into_the_other_region(
        regions: tuple[Regions, dict[str, str]]) -> None:
    """Offset translation: a group that committed in a finds its translated offsets on `a.headwater.events` in b
    (MM2's checkpoints and group offset sync, every 5 s), never past what b holds."""
    profile, env = regions
    a, b = profile.stack("a").cfg, profile.stack("b").cfg
    mirror_once(profile, "a", "b", env["HEADWATER_WRITE_KEY"])  # records on both sides, whatever ran before
    group = f"regions-offsets-{uuid.uuid4().hex}"
    ends = end_offsets(a.bootstrap, "headwater.events")
    remote_ends = end_offsets(b.bootstrap, "a.headwater.events")
    got = translated_offsets(group, ends, {"bootstrap.servers": a.bootstrap}, {"bootstrap.servers": b.bootstrap})
    print(f"\ngroup offsets in a {dict(sorted(ends.items()))} -> translated in b {dict(sorted(got.items()))}")
    assert sum(got.values()) > 0
    assert all(o <= remote_ends[p] for p, o in got.items())
