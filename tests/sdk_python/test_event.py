"""track() argument checks, timestamps, UUIDv7 ids and the JSON envelope."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from headwater import InvalidEventError
from headwater._event import EnvelopeFields, encode_envelope, envelope, make_event, to_epoch_ms
from headwater._ids import split_batch_id, uuid7

pytestmark = pytest.mark.unit


def test_uuid7_is_version_7_and_time_ordered() -> None:
    a, b = uuid7(1_000), uuid7(2_000)
    assert uuid.UUID(a).version == 7 and uuid.UUID(a).variant == uuid.RFC_4122
    assert a < b
    assert int(uuid.UUID(a).hex[:12], 16) == 1_000
    assert len({uuid7() for _ in range(10_000)}) == 10_000


def test_split_ids_are_stable_and_distinct() -> None:
    assert split_batch_id("b", 0) == split_batch_id("b", 0) != split_batch_id("b", 1)


@pytest.mark.parametrize("event_type", ["", "Page", "1x", "a-b", "a" * 65, None, 3])
def test_bad_event_types(event_type: object) -> None:
    with pytest.raises(InvalidEventError):
        make_event(event_type, {}, None, None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"properties": [1]}, "mapping"),
    ({"partition_key": 5}, "partition_key"),
    ({"event_id": "nope"}, "UUID"),
    ({"timestamp": "yesterday"}, "timestamp"),
    ({"timestamp": float("nan")}, "finite"),
])
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    args = {"properties": {}, "partition_key": None, "event_id": None, "timestamp": None, **kwargs}
    with pytest.raises(InvalidEventError, match=match):
        make_event("page_view", args["properties"], args["partition_key"], args["event_id"],  # type: ignore[arg-type]
                   args["timestamp"])  # type: ignore[arg-type]


def test_timestamps() -> None:
    aware = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert to_epoch_ms(aware) == 1_767_225_600_000
    assert to_epoch_ms(aware.replace(tzinfo=None)) == 1_767_225_600_000  # naive means UTC
    assert to_epoch_ms(1_767_225_600.5) == 1_767_225_600_500


def test_properties_are_copied() -> None:
    props = {"a": 1}
    ev = make_event("page_view", props, None, None, None)
    props["a"] = 2
    assert ev.properties == {"a": 1}


def test_envelope_fields_and_encoding() -> None:
    eid = str(uuid.uuid4())
    ev = make_event("page_view", {"url": "/"}, "user-1", eid, 1.0)
    env = envelope(ev, 7, EnvelopeFields("p", "node", {"app": "shop"}))
    assert env == {"event_id": eid, "event_type": "page_view", "producer_id": "p", "seq": 7, "node_id": "node",
                   "created_at": 1000, "partition_key": "user-1", "context": {"app": "shop"},
                   "properties": {"url": "/"}}
    assert encode_envelope(env).startswith(b'{"event_id"')


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "\ud800", object()])
def test_unencodable_properties_raise_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        encode_envelope({"properties": {"x": bad}})
