"""Unit tests of the pure parts: positions, `from=`, filters, stream names and scopes, read keys, SSE frames."""

from __future__ import annotations

import datetime
import gc
import hashlib
import uuid

import pytest

from subscribe import position as pos
from subscribe import sse
from subscribe.errors import BadRequest, Forbidden, Unauthorized
from subscribe.filters import fields_of, parse_filter
from subscribe.keys import new_read_key, parse_read_keys
from subscribe.streams import Topics, in_scope, parse_stream, valid_scope

pytestmark = pytest.mark.unit
TAG = pos.topic_tag("headwater.events")


def test_position_round_trip_and_padding() -> None:
    event_id = pos.encode(TAG, (5, 0, 123456789012))
    assert pos.decode(TAG, event_id, 3) == (5, 0, 123456789012)
    assert pos.decode(TAG, event_id.decode(), 5) == (5, 0, 123456789012, 0, 0)  # partitions added since
    assert pos.decode_shared(event_id) == (5, 0, 123456789012)


@pytest.mark.parametrize("bad", ["", "x", "0000-1", pos.topic_tag("other").decode() + "-1.2.3", "zz" * 10_000,
                                 TAG.decode() + "-1..2", TAG.decode() + "-1.2.3.4", TAG.decode() + "-" + "9" * 20,
                                 TAG.decode() + "-1\n2"])
def test_position_refuses_what_the_server_never_sent(bad: str) -> None:
    with pytest.raises(BadRequest) as exc:
        pos.decode(TAG, bad, 3)
    assert exc.value.code == "invalid_last_event_id"
    assert len(exc.value.message) <= 300


def test_from() -> None:
    now = 1_764_100_000_000
    assert pos.parse_from(None, now) == "latest"
    assert pos.parse_from("earliest", now) == "earliest"
    assert pos.parse_from("1764000000000", now) == 1764000000000
    assert pos.parse_from("2025-11-25T10:00:00Z", now) == 1764064800000
    for bad in ("yesterday", "2025-11-25T10:00:00", "-5", str(now + 2 * 86_400_000), "9" * 40):
        with pytest.raises(BadRequest) as exc:
            pos.parse_from(bad, now)
        assert exc.value.code == "invalid_from"


def test_filter_matches_by_type_and_value() -> None:
    f = parse_filter('{"region": ["eu", "us"], "properties.status": 200, "ok": true}')
    assert f is not None
    base = {"region": "eu", "properties": {"status": 200}, "ok": True}
    assert f.matches(base)
    assert f.matches({**base, "properties": {"status": 200.0}})
    assert not f.matches({**base, "region": "ap"})
    assert not f.matches({**base, "properties": {"status": "200"}})
    assert not f.matches({**base, "ok": 1})
    assert not f.matches({**base, "properties": None})
    assert not f.matches({"region": "eu"})
    assert not f.matches("a string record")
    null = parse_filter('{"x": null}')
    assert null is not None and null.matches({"x": None}) and not null.matches({})


def test_filter_fields_are_scalar_leaves_the_collector_does_not_track() -> None:
    event_id = uuid.UUID("0194f3c2-7b1a-7cde-8f00-0123456789ab")
    value = {"event_id": event_id, "seq": 3, "at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
             "context": {"app": {"build": {"sha": "abc", "deep": {"x": 1}}}, "tags": ["a"]},
             "properties": {"a.b": "dotted", "path": "/p", "ok": False, "none": None}}
    fields = fields_of(value)
    assert fields == {"event_id": str(event_id), "seq": 3, "context.app.build.sha": "abc",
                      "properties.path": "/p", "properties.ok": False, "properties.none": None}
    assert not gc.is_tracked(fields)  # a ring of them costs the collector nothing
    by_id = parse_filter(f'{{"event_id": "{event_id}"}}')  # a UUID compares as the text the JSON shows
    assert by_id is not None and by_id.matches(value) and by_id.matches_fields(fields)
    for unmatched in ('{"at": "2026"}', '{"context.tags": "a"}', '{"context.app": "x"}'):
        f = parse_filter(unmatched)  # a timestamp, a list, an object: never matched
        assert f is not None and not f.matches(value), unmatched
    assert fields_of("a string record") == {} and fields_of(None) == {}


@pytest.mark.parametrize("bad", ["[1]", "{}", "{", '{"a": NaN}', '{"a": {"b": 1}}', '{"a": []}',
                                 '{"a.b.c.d.e": 1}', '{"a..b": 1}', '{"a": "' + "x" * 300 + '"}',
                                 "{" + ",".join(f'"f{i}": 1' for i in range(9)) + "}",
                                 '{"a": [' + ",".join(str(i) for i in range(17)) + "]}",
                                 "[" * 3000, '{"a": ' + "1" * 2100 + "}"])
def test_filter_refuses_what_is_not_bounded(bad: str) -> None:
    with pytest.raises(BadRequest) as exc:
        parse_filter(bad)
    assert exc.value.code == "invalid_filter"


def test_streams_and_scopes() -> None:
    topics = Topics(overrides={"purchase": "shop.purchases"})
    assert parse_stream("event.page_view", topics).topic == "headwater.events"
    assert parse_stream("event.purchase", topics).topic == "shop.purchases"
    assert parse_stream("rule.slow_pages_alert", topics).topic == "headwater.rule.slow_pages_alert"
    assert parse_stream("deadletter", topics).avro is False
    for bad in ("events", "event.", "event.Page", "rule.a-b", "rule." + "a" * 70, "../x", "deadletter2"):
        with pytest.raises(BadRequest):
            parse_stream(bad, topics)
    assert in_scope("rule.x", ("rule.*",)) and in_scope("deadletter", ("*",))
    assert not in_scope("event.page_view", ("rule.*", "deadletter"))
    assert valid_scope("event.*") and not valid_scope("ev*") and not valid_scope("rule.x*")


def test_read_keys() -> None:
    key, other = new_read_key(), new_read_key()
    keys = parse_read_keys(f"dash:{hashlib.sha256(key.encode()).hexdigest()}:rule.*|deadletter\n"
                           f"old:{hashlib.sha256(other.encode()).hexdigest()}:*:revoked  # rotated")
    entry = keys.authenticate(f"Bearer {key}", None)
    assert entry.name == "dash" and entry.allows("rule.alerts") and not entry.allows("event.page_view")
    assert keys.authenticate(None, key).name == "dash"
    cases = [(None, None, "missing_read_key"), ("Basic abc", None, "missing_read_key"),
             ("Bearer hwr_unknown", None, "invalid_read_key"), (None, "hw_" + key[4:], "write_key_not_allowed"),
             (f"Bearer {other}", None, "read_key_revoked"), ("Bearer " + "hwr_" + "x" * 300, None, "invalid_read_key")]
    for header, token, code in cases:
        with pytest.raises((Unauthorized, Forbidden)) as exc:
            keys.authenticate(header, token)
        assert exc.value.code == code
    for bad in ("dash:abc:rule.*", f"dash:{'a' * 64}:", f"dash:{'a' * 64}:rules", f"d d:{'a' * 64}:*",
                f"dash:{'a' * 64}:*:gone"):
        with pytest.raises(ValueError):
            parse_read_keys(bad)


def test_frames() -> None:
    event_id = pos.encode(TAG, (1, 2))
    frame = sse.record(event_id, b'{"a":1}')
    assert frame == b"id: " + event_id + b'\ndata: {"a":1}\n\n'
    assert sse.body_of(frame, len(event_id)) == b'{"a":1}'
    assert sse.preamble(2000, event_id).startswith(b"retry: 2000\nid: ")
    expected = b"event: cutoff\nid: " + event_id + b'\ndata: {"code":"x"}\n\n'
    assert sse.named("cutoff", event_id, {"code": "x"}) == expected
