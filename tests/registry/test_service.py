"""Unit tests of the registry's operations and storage replay, with the in-memory log behind the SchemaLog seam."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import TypeVar

import pytest

from registry import errors, ops
from registry.canonical import parse_schema
from registry.schema_log import MemoryLog, Record
from registry.service import Registry

pytestmark = pytest.mark.unit
T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    async def wrapper() -> T:
        return await coro

    return asyncio.run(wrapper())


def schema(*fields: str, name: str = "e") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "t",
                       "fields": [{"name": f, "type": "string", "default": ""} for f in fields]})


def started(records: list[Record] | None = None, level: str = "BACKWARD") -> Registry:
    registry = Registry(MemoryLog(records), level)
    run(registry.start())
    return registry


def register(registry: Registry, subject: str, text: str) -> int:
    return run(registry.register(subject, parse_schema(text)))


def test_ids_are_global_and_stable_and_versions_count_per_subject() -> None:
    r = started()
    assert register(r, "s1", schema("a")) == 1
    assert register(r, "s1", schema("a")) == 1  # idempotent, no new version
    assert register(r, "s1", schema("a", "b")) == 2
    assert register(r, "s2", schema("a", "b")) == 2  # same schema, other subject: same id
    assert [v.version for v in r.state.versions("s1")] == [1, 2]
    assert [(v.version, v.schema_id) for v in r.state.versions("s2")] == [(1, 2)]
    assert ops.lookup(r.state, "s1", parse_schema(schema("a"))).version == 1


def test_restart_replays_the_log_to_the_same_state() -> None:
    log = MemoryLog()
    r = Registry(log)
    run(r.start())
    register(r, "s", schema("a"))
    register(r, "s", schema("a", "b"))
    run(r.set_level("s", {"compatibility": "full"}))
    run(r.delete_version("s", "1", permanent=False))
    again = started(log.records)
    assert again.state.subjects == r.state.subjects
    assert {i: s.text for i, s in again.state.schemas.items()} == {i: s.text for i, s in r.state.schemas.items()}
    assert again.state.level("s") == "FULL"
    assert register(again, "s", schema("a", "b", "c")) == 3


def test_incompatible_change_is_409_under_backward_and_accepted_under_none() -> None:
    r = started()
    register(r, "s", schema("a"))
    breaking = json.dumps({"type": "record", "name": "e", "namespace": "t", "fields": [{"name": "a", "type": "int"}]})
    with pytest.raises(errors.IncompatibleSchema) as info:
        register(r, "s", breaking)
    assert info.value.status == 409 and "type_mismatch" in str(info.value) and "field a" in str(info.value)
    run(r.set_level("s", {"compatibility": "NONE"}))
    assert register(r, "s", breaking) == 2


def test_soft_then_hard_delete_with_confluent_codes() -> None:
    r = started()
    register(r, "s", schema("a"))
    register(r, "s", schema("a", "b"))
    with pytest.raises(errors.VersionNotSoftDeleted):
        run(r.delete_version("s", "1", permanent=True))
    assert run(r.delete_version("s", "1", permanent=False)) == 1
    with pytest.raises(errors.VersionSoftDeleted):
        run(r.delete_version("s", "1", permanent=False))
    assert [v.version for v in r.state.versions("s")] == [2]
    assert r.state.schemas[1]  # a soft-deleted version's schema stays readable by id
    with pytest.raises(errors.SubjectNotSoftDeleted):
        run(r.delete_subject("s", permanent=True))
    assert run(r.delete_subject("s", permanent=False)) == [2]
    with pytest.raises(errors.SubjectSoftDeleted):
        run(r.delete_subject("s", permanent=False))
    assert r.state.subject_names() == [] and r.state.subject_names(deleted=True) == ["s"]
    assert run(r.delete_subject("s", permanent=True)) == [1, 2]
    assert r.state.subjects == {} and r.state.schemas == {}
    with pytest.raises(errors.SubjectNotFound):
        run(r.delete_subject("s", permanent=False))


def compacted(records: list[Record]) -> list[Record]:
    """What Kafka's log cleaner leaves: the last record per key, tombstones removed, in offset order."""
    last = {key: i for i, (key, _) in enumerate(records)}
    return [records[i] for i in sorted(last.values()) if records[i][1] is not None]


def test_ids_of_hard_deleted_schemas_are_not_reused_after_compaction() -> None:
    log = MemoryLog()
    r = Registry(log)
    run(r.start())
    register(r, "s", schema("a"))
    register(r, "s", schema("a", "b"))
    run(r.delete_subject("s", permanent=False))
    run(r.delete_subject("s", permanent=True))
    again = started(compacted(log.records))
    assert again.state.subjects == {}
    assert register(again, "other", schema("x")) == 3


def test_a_fenced_write_is_decided_again() -> None:
    log = MemoryLog()
    r = Registry(log)
    run(r.start())
    log.fence_next = 2
    assert register(r, "s", schema("a")) == 1
    assert len(log.records) == 1
    log.fence_next = 99
    with pytest.raises(errors.WriteConflict):
        register(r, "s", schema("a", "b"))


def test_two_instances_on_one_log_agree() -> None:
    shared: list[Record] = []
    first, second = Registry(MemoryLog(shared)), Registry(MemoryLog(shared))
    run(first.start())
    run(second.start())
    assert register(first, "s", schema("a")) == 1
    assert register(second, "s", schema("a", "b")) == 2  # the writer catches up before deciding
    assert register(first, "t", schema("a", "b")) == 2
    assert [v.version for v in first.state.versions("s")] == [1, 2]


def test_malformed_records_are_skipped_at_replay() -> None:
    r = started([(b"not json", b"{}"), (b'{"keytype":"SCHEMA","subject":"s","version":1}', b"[]"),
                 (b'{"keytype":"NOOP"}', None)])
    assert r.state.subjects == {} and r.state.applied == 3


def test_config_levels_and_their_errors() -> None:
    r = started()
    assert ops.get_level(r.state, None, False) == "BACKWARD"
    with pytest.raises(errors.SubjectConfigNotFound):
        ops.get_level(r.state, "s", False)
    assert ops.get_level(r.state, "s", True) == "BACKWARD"
    with pytest.raises(errors.InvalidCompatibilityLevel) as info:
        run(r.set_level(None, {"compatibility": "SIDEWAYS"}))
    assert info.value.code == 42203
    assert run(r.set_level(None, {"compatibility": "forward"})) == "FORWARD"
    assert ops.get_level(r.state, "s", True) == "FORWARD"
    assert run(r.delete_level(None)) == "FORWARD"
    assert ops.get_level(r.state, None, False) == "BACKWARD"


@pytest.mark.parametrize("raw", ["0", "abc", str(2**31), "-2"])
def test_invalid_versions_are_42202(raw: str) -> None:
    with pytest.raises(errors.InvalidVersion) as info:
        ops.parse_version(raw)
    assert info.value.code == 42202


def test_lookup_and_version_errors() -> None:
    r = started()
    with pytest.raises(errors.SubjectNotFound):
        ops.get_version(r.state, "s", "latest")
    register(r, "s", schema("a"))
    with pytest.raises(errors.VersionNotFound):
        ops.get_version(r.state, "s", "7")
    with pytest.raises(errors.SchemaNotFound):
        ops.lookup(r.state, "s", parse_schema(schema("zzz")))
    assert ops.get_version(r.state, "s", "-1").version == 1


def test_writes_that_change_nothing_append_nothing() -> None:
    log = MemoryLog()
    r = Registry(log)
    run(r.start())
    register(r, "s", schema("a"))
    run(r.set_level("s", {"compatibility": "FULL"}))
    before = len(log.records)
    register(r, "s", schema("a"))
    run(r.set_level("s", {"compatibility": "full"}))
    assert len(log.records) == before == 2
