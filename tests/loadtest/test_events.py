"""Unit tests of the event generator: every event is 1-3 KB as JSON and valid against its type's latest schema."""

from __future__ import annotations

import uuid
from typing import Any

import fastavro
import msgspec
import pytest
from fastavro.validation import validate

from loadtest.events import EVENT_TYPES, MAX_BYTES, MIN_BYTES, EventFactory, uuid7
from schemas.catalog import load_catalog

pytestmark = pytest.mark.unit
PRODUCER = "5b7b2d0e-3f3a-4c59-9f61-3f1f3a0c9e4d"
NOW_MS = 1_795_313_484_990


def _latest_schemas() -> dict[str, Any]:
    catalog = load_catalog()
    return {name: fastavro.parse_schema(et.schema(et.latest_version)) for name, et in catalog.event_types.items()}


def _as_record(event: dict[str, Any]) -> dict[str, Any]:
    """The event as the gateway stores it: the envelope fields the batch and the gateway add, no partition key."""
    return {**event, "sent_at": NOW_MS, "received_at": None, "sdk_name": "headwater-loadtest", "sdk_version": "0.1.0"}


def test_generator_covers_every_catalog_event_type() -> None:
    assert set(EVENT_TYPES) == set(load_catalog().event_types)


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_events_are_one_to_three_kilobytes_and_schema_valid(event_type: str) -> None:
    schemas = _latest_schemas()
    factory = EventFactory(seed=11)
    for seq in range(400):
        event = factory.event(PRODUCER, "lt-node-0000001", seq, NOW_MS, event_type)
        size = len(msgspec.json.encode(event))
        assert MIN_BYTES <= size <= MAX_BYTES, (seq, size)
        assert validate(_as_record(event), schemas[event_type], raise_errors=True)
        assert (event["event_type"], event["seq"], event["producer_id"]) == (event_type, seq, PRODUCER)


def test_the_mix_draws_every_type_and_sizes_spread_over_the_range() -> None:
    factory = EventFactory(seed=3)
    events = [factory.event(PRODUCER, "n", i, NOW_MS) for i in range(2000)]
    assert {e["event_type"] for e in events} == set(EVENT_TYPES)
    sizes = [len(msgspec.json.encode(e)) for e in events]
    assert min(sizes) < 1400 and max(sizes) > 2400  # spread across 1-3 KB, not one size


def test_same_seed_same_properties() -> None:
    first = EventFactory(seed=5).event(PRODUCER, "n", 0, NOW_MS)
    second = EventFactory(seed=5).event(PRODUCER, "n", 0, NOW_MS)
    assert first["properties"] == second["properties"]
    assert first["event_id"] != second["event_id"]  # ids stay unique


def test_uuid7_layout_and_order() -> None:
    ids = [uuid.UUID(uuid7(NOW_MS + i)) for i in range(3)]
    assert all(u.version == 7 and u.variant == uuid.RFC_4122 for u in ids)
    assert ids[0].int >> 80 == NOW_MS
    assert sorted(ids) == ids
