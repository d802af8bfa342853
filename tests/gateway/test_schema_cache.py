"""The schema cache with a fake registry: event types discovered from the registry, schema-id membership
(issue 14 item 2), bounded negative cache and per-source lookup budget (item 6), shared snapshot (item 13)."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway import lookup_limits
from gateway.avro_batch import decode_avro_batch
from gateway.config import Limits
from gateway.errors import RateLimited
from gateway.ingest import avro_misses, json_misses, plan_avro, plan_json
from gateway.json_batch import decode_json_batch
from gateway.lookup_limits import LookupBudget, NegativeCache
from gateway.records import RequestMeta
from gateway.schema_cache import SchemaCache
from gateway.schemas import TopicMap
from tests.gateway.helpers import (
    FakeRegistry,
    avro_batch,
    avro_event,
    avro_record,
    batch,
    dumps,
    event_type_schema,
    page_view,
)
from tests.support.wait import wait_until

pytestmark = pytest.mark.unit
META = RequestMeta.make(str(uuid.uuid4()), 1, "dev", "127.0.0.1", "test")

SIGNUP_V1 = event_type_schema("signup")


def _spoof_of(page_view_text: str) -> str:
    """page_view's record name with a field of another type: incompatible with headwater.events.page_view."""
    schema: dict[str, Any] = json.loads(page_view_text)
    schema["fields"] = [f if f["name"] != "seq" else {"name": "seq", "type": "string"} for f in schema["fields"]]
    return json.dumps(schema)


def _cache(registry: FakeRegistry, **kw: Any) -> SchemaCache:
    cache = SchemaCache(registry, **kw)
    asyncio.run(cache.refresh())
    assert cache.healthy and cache.loaded
    return cache


def _plan_json(cache: SchemaCache, *events: dict[str, Any]) -> Any:
    wire, evs = decode_json_batch(dumps(batch(*events)), Limits())

    async def fetch() -> None:
        await asyncio.gather(*(cache.fetch_version(t, v) for t, v in json_misses(evs, cache)))

    asyncio.run(fetch())
    return plan_json(wire, evs, cache, META, "dlq")


def test_event_types_come_from_the_registry_subjects() -> None:
    cache = _cache(FakeRegistry())
    assert sorted(cache.routes) == ["page_view", "purchase", "server_metric"]
    assert cache.routes["page_view"].subject == "headwater.events.page_view"


def test_a_type_registered_after_start_is_served_on_a_miss_with_its_configured_topic() -> None:
    registry = FakeRegistry()
    cache = _cache(registry, topics=TopicMap("headwater.events", {"signup": "headwater.signups"}))
    event = page_view(event_type="signup", properties={"plan": "pro"})
    plan = _plan_json(cache, event)
    assert plan.accepted == 0 and plan.rejected[0].code == "unknown_event_type"
    registry.register("headwater.events.signup", SIGNUP_V1)
    assert cache.known_missing(("headwater.events.signup", 0))  # within the negative TTL: no new lookup
    cache._missing.discard(("headwater.events.signup", 0))  # as after the TTL
    plan = _plan_json(cache, event)
    assert plan.accepted == 1 and plan.records[0].topic == "headwater.signups"


def test_refresh_discovers_new_subjects_and_ignores_others() -> None:
    registry = FakeRegistry()
    cache = _cache(registry)
    registry.register("headwater.events.signup", SIGNUP_V1)
    registry.register("some-other-value", SIGNUP_V1.replace('"signup"', '"other"', 1))
    registry.register("headwater.events.Bad-Name", SIGNUP_V1)
    asyncio.run(cache.refresh())
    assert sorted(cache.routes) == ["page_view", "purchase", "server_metric", "signup"]
    assert cache.routes["signup"].topic == "headwater.events"


def test_an_avro_schema_id_of_another_subject_is_refused_even_with_the_event_record_name() -> None:
    registry = FakeRegistry()
    cache = _cache(registry)
    good_id = registry.id_of("page_view", 2)
    spoof = _spoof_of(registry.by_id[good_id]["schema"])
    spoof_id = registry.register("attacker.subject", spoof)
    record = avro_record(page_view())
    record["seq"] = "not a long"
    framed = avro_event(spoof, spoof_id, record)
    ids = avro_misses([framed], cache)
    assert ids == {spoof_id}
    asyncio.run(cache.fetch_id(spoof_id))
    plan = plan_avro(decode_avro_batch(avro_batch([framed]), Limits()), cache, META, "dlq")
    assert plan.accepted == 0 and plan.rejected[0].code == "unknown_schema_id"
    assert [r.topic for r in plan.records] == ["dlq"]


def test_an_id_that_is_a_version_of_the_subject_is_accepted_on_a_miss() -> None:
    registry = FakeRegistry()
    cache = SchemaCache(registry)  # cold: nothing loaded, the id is fetched on the miss
    sid = registry.id_of("page_view", 2)
    framed = avro_event(registry.by_id[sid]["schema"], sid, avro_record(page_view()))
    asyncio.run(cache.fetch_id(sid))
    plan = plan_avro(decode_avro_batch(avro_batch([framed]), Limits()), cache, META, "dlq")
    assert plan.accepted == 1 and plan.records[0].topic == "headwater.events"
    assert f"/schemas/ids/{sid}/versions" in registry.calls



class FakeClock:
    """Stands in for the `time` module of gateway/lookup_limits.py: monotonic() is `now`, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_the_negative_cache_is_bounded_and_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = FakeRegistry()
    cache = SchemaCache(registry, negative=NegativeCache(size=50, ttl_s=60))

    async def flood() -> None:
        await asyncio.gather(*(cache.fetch_id(10_000 + i) for i in range(500)))

    asyncio.run(flood())
    assert len(cache._missing) == 50
    assert cache.known_missing(10_499) and not cache.known_missing(10_000)
    clock = FakeClock()
    monkeypatch.setattr(lookup_limits, "time", clock)  # the cache's clock, injected
    short = NegativeCache(size=10, ttl_s=0.05)
    short.add("k")
    assert "k" in short
    clock.now += 0.1
    assert "k" not in short and len(short) == 0


def test_lookup_budget_per_source() -> None:
    budget = LookupBudget(rate=2.0, burst=4, retry_after_s=1)
    budget.charge("a", 4, now=100.0)
    with pytest.raises(RateLimited) as info:
        budget.charge("a", 1, now=100.0)
    assert info.value.status == 429 and info.value.code == "schema_lookups_limited"
    assert (info.value.retry_after or 0) >= 1
    budget.charge("b", 4, now=100.0)  # another source has its own bucket
    budget.charge("a", 1, now=100.6)  # refilled at 2/s
    budget.charge("a", 0, now=100.6)  # no lookup, no charge
    small = LookupBudget(rate=1.0, burst=1, retry_after_s=1, max_sources=3)
    for i in range(10):
        small.charge(f"s{i}", 1, now=1.0)
    assert len(small._buckets) == 3


def test_a_cold_cache_loads_the_shared_snapshot_while_the_registry_is_down(tmp_path: Path) -> None:
    snapshot = tmp_path / "schemas.json"
    registry = FakeRegistry()
    _cache(registry, snapshot=snapshot)
    assert snapshot.exists()
    registry.down = True
    cold = SchemaCache(registry, snapshot=snapshot)
    asyncio.run(asyncio.wait_for(cold.load(retry_s=0.05), 10))
    assert cold.loaded and not cold.healthy
    assert cold.by_version(cold.routes["page_view"], 2) is not None


def test_a_cold_cache_without_snapshot_waits_for_the_registry() -> None:
    registry = FakeRegistry()
    registry.down = True
    cold = SchemaCache(registry)

    async def main() -> None:
        task = asyncio.create_task(cold.load(retry_s=0.05))
        await wait_until("three tries of the registry", lambda: len(registry.calls) >= 3)
        assert not task.done() and not cold.loaded
        registry.down = False
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    assert cold.loaded and cold.healthy
