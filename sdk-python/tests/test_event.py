"""track() argument checks, property conversion (naming the bad field), timestamps, ids and the JSON envelope."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any

import pytest

from headwater import InvalidEventError
from headwater._event import EnvelopeEncoder, to_epoch_ms
from headwater._ids import split_batch_id, uuid7
from headwater._properties import clean_properties, sendable_properties

pytestmark = pytest.mark.unit
UTC = dt.timezone.utc
ENC = EnvelopeEncoder("p", "node", {"app": "shop"})


def encode(props: Any = None, *, event_type: Any = "page_view", partition_key: Any = None, event_id: Any = None,
           timestamp: Any = None, seq: int = 7) -> dict[str, Any]:
    head, tail = ENC.encode(event_type, props, partition_key, event_id, timestamp)
    return json.loads(head + str(seq).encode() + tail)  # type: ignore[no-any-return]


def test_uuid7_is_version_7_and_time_ordered() -> None:
    a, b = uuid7(1_000), uuid7(2_000)
    assert uuid.UUID(a).version == 7 and uuid.UUID(a).variant == uuid.RFC_4122
    assert a < b
    assert int(uuid.UUID(a).hex[:12], 16) == 1_000
    assert len({uuid7() for _ in range(10_000)}) == 10_000


def test_split_ids_follow_decisions_2() -> None:
    parent = "0192b0a4-1c2d-7e3f-8a4b-5c6d7e8f9a0b"
    ns = uuid.UUID("6f1f0c2e-9a10-4b59-8d55-2f6f1d1b9a10")
    assert split_batch_id(parent, 0) == str(uuid.uuid5(ns, parent + "/0"))
    assert split_batch_id(parent, 1) == str(uuid.uuid5(ns, parent + "/1")) != split_batch_id(parent, 0)


@pytest.mark.parametrize("event_type", ["", "Page", "1x", "a-b", "a" * 65, None, 3])
def test_bad_event_types(event_type: object) -> None:
    with pytest.raises(InvalidEventError, match="event_type") as err:
        encode({}, event_type=event_type)
    assert err.value.code == "invalid_event_type" and err.value.field == "event_type"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"props": [1]}, "mapping"),
    ({"partition_key": 5}, "partition_key"),
    ({"event_id": "nope"}, "UUID"),
    ({"timestamp": "yesterday"}, "timestamp"),
    ({"timestamp": float("nan")}, "timestamp"),
    ({"timestamp": 1e300}, "timestamp"),
])
def test_bad_arguments(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidEventError, match=match):
        encode(**kwargs)


@pytest.mark.parametrize(("props", "match", "field", "code"), [
    ({"x": float("nan")}, r"properties\.x: nan is not a finite number", "properties.x", "invalid_property_value"),
    ({"x": {"y": [1, float("inf")]}}, r"properties\.x\.y\[1\]: inf", "properties.x.y[1]", "invalid_property_value"),
    ({"big": 1 << 63}, r"properties\.big: integer 9223372036854775808 does not fit in 64 bits", "properties.big",
     "invalid_property_value"),
    ({"small": -(1 << 63) - 1}, r"properties\.small: integer .* 64 bits", "properties.small", "invalid_property_value"),
    ({"b": b"raw"}, r"properties\.b: bytes", "properties.b", "invalid_property_value"),
    ({"o": object()}, r"properties\.o: a object has no JSON form", "properties.o", "invalid_property_value"),
    ({"k": {1: "x"}}, r"properties\.k: key 1 is a int", "properties.k", "invalid_property_key"),
    ({"s": "\ud800"}, r"properties\.s: holds a lone surrogate", "properties.s", "invalid_property_value"),
    ({"d": decimal.Decimal("NaN")}, r"properties\.d: Decimal NaN", "properties.d", "invalid_property_value"),
    ({"t": ("ok", "\ud800")}, r"properties\.t\[1\]: holds a lone surrogate", "properties.t[1]",
     "invalid_property_value"),
])
def test_bad_properties_fail_at_track_naming_the_field(props: dict[str, Any], match: str, field: str,
                                                       code: str) -> None:
    with pytest.raises(InvalidEventError, match=match) as err:
        encode(props)
    assert (err.value.field, err.value.code) == (field, code)


def test_too_deep_properties_are_refused() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(InvalidEventError, match="nested deeper"):
        encode(deep)


class Colour(enum.Enum):
    RED = "red"


def test_documented_conversions() -> None:
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    props = encode({
        "when": dt.datetime(2026, 11, 23, 20, 0, tzinfo=UTC), "naive": dt.datetime(2026, 11, 23, 20, 0),
        "day": dt.date(2026, 11, 23), "price": decimal.Decimal("12.50"), "count": decimal.Decimal("3"),
        "id": u, "tags": {"b", "a"}, "pair": (1, 2), "colour": Colour.RED, "max": (1 << 63) - 1, "ok": True,
    })["properties"]
    assert props == {"when": "2026-11-23T20:00:00+00:00", "naive": "2026-11-23T20:00:00+00:00", "day": "2026-11-23",
                     "price": 12.5, "count": 3, "id": str(u), "tags": ["a", "b"], "pair": [1, 2], "colour": "red",
                     "max": (1 << 63) - 1, "ok": True}


@pytest.mark.parametrize("props", [
    {"s": "x", "i": -(1 << 63), "f": 1.5, "b": False, "n": None, "l": [1, ("a", {"k": [None]})], "e": {}, "t": ()},
    {"i": True, "sub": Colour.RED},  # a bool, and an Enum (a subclass): converted
    {"f": 2.0, "nested": {"d": decimal.Decimal("1.5")}},  # a Decimal deep inside: the whole mapping is converted
])
def test_plain_properties_encode_as_their_converted_copy(props: dict[str, Any]) -> None:
    """Plain mappings are encoded without a copy; the JSON is the same as for the converted deep copy."""
    fast = json.dumps(sendable_properties(props), separators=(",", ":"))
    assert fast == json.dumps(clean_properties(props), separators=(",", ":"))
    assert encode(props)["properties"] == json.loads(fast)


def test_plain_properties_keep_the_depth_bound() -> None:
    deep: list[Any] = []
    node = deep
    for _ in range(40):
        node.append([])
        node = node[0]
    with pytest.raises(InvalidEventError, match="nested deeper"):
        encode({"l": deep})


def test_timestamps() -> None:
    aware = dt.datetime(2026, 1, 1, tzinfo=UTC)
    assert to_epoch_ms(aware) == 1_767_225_600_000
    assert to_epoch_ms(aware.replace(tzinfo=None)) == 1_767_225_600_000  # naive means UTC
    assert to_epoch_ms(1_767_225_600.5) == 1_767_225_600_500


def test_nested_properties_are_deep_copied_at_track() -> None:
    props: dict[str, Any] = {"a": 1, "cart": {"items": [{"sku": "x"}]}}
    head, tail = ENC.encode("page_view", props, None, None, None)
    props["a"] = 2
    props["cart"]["items"][0]["sku"] = "changed"
    props["cart"]["items"].append({"sku": "y"})
    assert json.loads(head + b"0" + tail)["properties"] == {"a": 1, "cart": {"items": [{"sku": "x"}]}}


def test_envelope_fields_and_encoding() -> None:
    eid = str(uuid.uuid4())
    env = encode({"url": "/"}, partition_key="user-1", event_id=eid, timestamp=1.0)
    assert env == {"event_id": eid, "event_type": "page_view", "producer_id": "p", "seq": 7, "node_id": "node",
                   "created_at": 1000, "partition_key": "user-1", "context": {"app": "shop"},
                   "properties": {"url": "/"}}
    assert list(env) == ["event_id", "event_type", "producer_id", "seq", "node_id", "created_at", "partition_key",
                         "context", "properties"]
