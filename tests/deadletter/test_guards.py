"""Unit tests of the dead-letter tool's guards against poisoned records: forgery checks, the record size limit,
times out of range, terminal-safe text, and the gateway's topic routing read from its settings."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from deadletter import replay as replay_module
from deadletter.config import ConfigError, ToolConfig
from deadletter.gateway_code import new_cache
from deadletter.records import Letter, parse
from deadletter.revalidate import StillInvalid, forgery, revalidate
from deadletter.summary import iso, summarise, summary_table, table
from deadletter.text import cell, safe, safe_json
from gateway.errors import RegistryUnavailable
from gateway.records import Headers, Rejection, RequestMeta, SchemaRef, dead_letter
from tests.deadletter.fakes import FakeRegistry, page_view

pytestmark = pytest.mark.unit


def letter_of(event: dict[str, Any], *, extra: Headers | None = None, received_at: int = 1_790_000_000_000,
              user_agent: str = "ua/1", value_edit: dict[str, Any] | None = None) -> Letter:
    meta = RequestMeta.make("7d3c4f7e-9f5b-4a57-8a0e-0c4d1c9b2a11", received_at, "dev", "10.0.0.1", user_agent)
    rec = dead_letter("headwater.deadletter", meta, Rejection(0, "unknown_schema_version", "no such version"),
                      json.dumps(event).encode(), is_json=True, schema=SchemaRef("headwater.events.page_view", 3, None),
                      key=event["node_id"], event_id=event["event_id"], event_type=event["event_type"],
                      producer_id=event["producer_id"])
    value = json.dumps({**json.loads(rec.value), **(value_edit or {})}).encode()
    return parse(0, 4, rec.key, value, [*rec.headers, *(extra or [])])


def cache() -> Any:
    c = new_cache(FakeRegistry())
    asyncio.run(c.refresh())
    return c


def test_a_dead_letter_as_the_gateway_writes_it_is_no_forgery() -> None:
    assert forgery(letter_of(page_view(1, "g"))) is None
    assert forgery(letter_of(page_view(1, "g"), extra=[("x-trace", b"1")])) is None  # unknown: dropped, not refused


@pytest.mark.parametrize(("extra", "edit", "why"), [
    ([("replayed_from", b"headwater.deadletter:0:1")], None, "replay headers"),
    ([("replay_run", b"r")], None, "replay headers"),
    ([("source", b"admin")], None, "source header"),
    (None, {"source": "admin"}, "source header"),
    (None, {"batch_id": "other"}, "batch_id header"),
    (None, {"received_at": 5}, "received_at header"),
    (None, {"reason": "other"}, "reason header"),
])
def test_dead_letters_that_contradict_themselves_are_forgeries(extra: Headers | None, edit: dict[str, Any] | None,
                                                               why: str) -> None:
    letter = letter_of(page_view(1, "f"), extra=extra, value_edit=edit)
    assert why in (forgery(letter) or "")
    outcome = revalidate(letter, cache(), "headwater.deadletter", "run")
    assert isinstance(outcome, StillInvalid) and outcome.code == "forged_dead_letter"


def test_replayed_headers_are_the_gateways_and_the_replays_only() -> None:
    letter = letter_of(page_view(1, "h"), extra=[("x-trace", b"1")])
    record = revalidate(letter, cache(), "headwater.deadletter", "run")
    assert not isinstance(record, StillInvalid)
    assert [k for k, _ in record.headers] == ["event_id", "producer_id", "batch_id", "received_at", "client_ip",
                                              "user_agent", "source", "replayed_from", "replayed_at", "replay_run"]


def test_a_record_over_the_producer_limit_is_still_invalid() -> None:
    outcome = revalidate(letter_of(page_view(1, "big"), user_agent="ua/1 " + "u" * (2 << 20)), cache(), "dl", "run")
    assert isinstance(outcome, StillInvalid) and outcome.code == "record_too_large"


def test_the_gateway_topic_settings_route_replayed_events() -> None:
    cfg = ToolConfig.from_env({"KAFKA_BOOTSTRAP": "k:1", "HEADWATER_GATEWAY_EVENTS_TOPIC": "ev",
                               "HEADWATER_GATEWAY_TOPIC_OVERRIDES": "page_view=pv"})
    assert cfg.topics.route("page_view").topic == "pv" and cfg.topics.route("purchase").topic == "ev"
    c = new_cache(FakeRegistry(), cfg.topics)
    asyncio.run(c.refresh())
    record = revalidate(letter_of(page_view(1, "r")), c, "dl", "run")
    assert not isinstance(record, StillInvalid) and record.topic == "pv"
    with pytest.raises(ConfigError, match="HEADWATER_GATEWAY_TOPIC_OVERRIDES"):
        ToolConfig.from_env({"KAFKA_BOOTSTRAP": "k:1", "HEADWATER_GATEWAY_TOPIC_OVERRIDES": "page_view"})
    with pytest.raises(ConfigError, match="HEADWATER_GATEWAY_EVENTS_TOPIC"):
        ToolConfig.from_env({"KAFKA_BOOTSTRAP": "k:1", "HEADWATER_GATEWAY_EVENTS_TOPIC": "a b"})


@pytest.mark.parametrize("ms", [10**30, -(10**18), 2**63, 10**200])
def test_times_no_calendar_holds_are_shown_as_numbers(ms: int) -> None:
    shown = iso(ms)
    assert "out of range" in shown and len(shown) < 50
    groups = summarise([letter_of(page_view(1, "t"), received_at=ms)])
    assert "out of range" in summary_table(groups)


def test_control_and_reordering_characters_are_escaped() -> None:
    assert safe("a\x1b[2Jb\x07\x9b1m\u202ec\td\ne") == "a\\x1b[2Jb\\x07\\x9b1m\\u202ec\td\ne"
    assert cell("x\ny\tz") == "x\\x0ay\\x09z"
    assert "é" in safe("é") and safe("日本") == "日本"
    doc = safe_json(json.dumps({"k": "\x1b\x9b\u202e\u2066"}, ensure_ascii=False))
    assert json.loads(doc) == {"k": "\x1b\x9b\u202e\u2066"} and not any(c in doc for c in "\x1b\x9b\u202e\u2066")
    rendered = table([["a\x1b[31m", "b"]], ["h1", "h2"])
    assert "\x1b" not in rendered and rendered.splitlines()[2].startswith("a\\x1b[31m")


def test_replay_waits_for_an_unreachable_registry_then_fails_cleanly(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def down(url: str, topics: Any, **_: Any) -> Any:
        calls.append(url)
        raise RegistryUnavailable("registry unreachable")

    monkeypatch.setattr(replay_module, "load_cache", down)
    monkeypatch.setattr(replay_module, "REGISTRY_WAIT_S", 1.0)
    with pytest.raises(replay_module.ReplayError, match="unreachable"):
        replay_module.replay(ToolConfig(bootstrap="k:1", registry_url="http://r"), replay_module.ReplayOptions(run="r"))
    assert len(calls) >= 2  # tried again (tenacity) before giving up
