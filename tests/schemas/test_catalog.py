"""The schemas in schemas/: catalog, envelope, naming, and the declared compatibility of every version pair."""

from __future__ import annotations

import json
from pathlib import Path

import avro.schema
import fastavro
import pytest

from registry import compat
from schemas import SCHEMAS_DIR, CatalogError, EventType, load_catalog
from schemas.catalog import COMPATIBILITY_LEVELS, subject_for
from schemas.diff import diff

pytestmark = pytest.mark.unit

CATALOG = load_catalog()
ENVELOPE = json.loads((SCHEMAS_DIR / "envelope.avsc").read_text())
EVERY_FILE = [(et, n) for et in CATALOG.event_types.values() for n in range(1, et.latest_version + 1)]


def ids(param: tuple[EventType, int]) -> str:
    return f"{param[0].name}-v{param[1]}"


def test_catalog_has_the_three_event_types_sharing_the_events_topic() -> None:
    assert {"page_view", "purchase", "server_metric"} <= set(CATALOG.event_types)
    for et in CATALOG.event_types.values():
        assert et.subject == f"headwater.events.{et.name}" == subject_for(et.name)
        assert et.topic == "headwater.events"
        assert et.compatibility in COMPATIBILITY_LEVELS
        assert et.latest_version >= 2
        assert et.versions == sorted(et.versions, key=lambda p: int(p.stem.removeprefix("v")))
        assert [p.name for p in et.versions] == [f"v{n}.avsc" for n in range(1, et.latest_version + 1)]
        assert all(p.parent == SCHEMAS_DIR / "events" / et.name for p in et.versions)


def test_every_schema_file_is_listed_in_the_catalog() -> None:
    listed = {p for et in CATALOG.event_types.values() for p in et.versions}
    assert set((SCHEMAS_DIR / "events").glob("*/*.avsc")) == listed


@pytest.mark.parametrize("param", EVERY_FILE, ids=ids)
def test_schema_parses_and_follows_record_name_strategy(param: tuple[EventType, int]) -> None:
    et, n = param
    schema = et.schema(n)
    avro.schema.parse(et.schema_text(n))
    fastavro.parse_schema(schema)
    assert (schema["type"], schema["name"], schema["namespace"]) == ("record", et.name, "headwater.events")
    properties = schema["fields"][-1]
    assert properties["name"] == "properties"
    assert properties["type"]["type"] == "record"
    assert properties["type"]["name"] == f"{et.name}_properties"


@pytest.mark.parametrize("param", EVERY_FILE, ids=ids)
def test_envelope_fields_equal_envelope_avsc(param: tuple[EventType, int]) -> None:
    et, n = param
    assert et.schema(n)["fields"][:-1] == ENVELOPE["fields"]


def test_envelope_field_order_is_the_documented_one() -> None:
    assert [f["name"] for f in ENVELOPE["fields"]] == [
        "event_id", "event_type", "producer_id", "seq", "node_id", "created_at", "sent_at", "received_at",
        "sdk_name", "sdk_version", "context"]


def pairs() -> list[tuple[EventType, int, int]]:
    """(event type, earlier version, later version): consecutive pairs, and every earlier one if transitive."""
    out: list[tuple[EventType, int, int]] = []
    for et in CATALOG.event_types.values():
        for new in range(2, et.latest_version + 1):
            olds = range(1, new) if et.compatibility.endswith("_TRANSITIVE") else [new - 1]
            out.extend((et, old, new) for old in olds)
    return out


@pytest.mark.parametrize("pair", pairs(), ids=lambda p: f"{p[0].name}-v{p[1]}-v{p[2]}")
def test_version_pair_meets_the_declared_compatibility(pair: tuple[EventType, int, int]) -> None:
    et, old, new = pair
    problems = compat.check(et.compatibility.removesuffix("_TRANSITIVE"), avro.schema.parse(et.schema_text(new)),
                            [(old, avro.schema.parse(et.schema_text(old)))])
    assert problems == [], [str(p) for p in problems]


@pytest.mark.parametrize("pair", pairs(), ids=lambda p: f"{p[0].name}-v{p[1]}-v{p[2]}")
def test_later_versions_only_add_fields_with_defaults(pair: tuple[EventType, int, int]) -> None:
    et, old, new = pair
    changes = diff(et.schema(old), et.schema(new))
    assert changes
    assert all(c.kind == "added" and "(no default)" not in c.new for c in changes), [str(c) for c in changes]


def test_example_events_are_valid_and_realistically_sized() -> None:
    for et in CATALOG.event_types.values():
        example = json.loads((SCHEMAS_DIR / "examples" / f"{et.name}.json").read_text())
        parsed = fastavro.parse_schema(et.schema(et.latest_version))
        assert fastavro.validate(example, parsed, raise_errors=True)
        assert 1000 <= len(json.dumps(example)) <= 3000, et.name


def test_malformed_catalog_entries_are_named(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"page_view": {"subject": "page_view-value", "topic": "t", "compatibility": "BACKWARD",
                                              "versions": ["v1.avsc"]}}))
    with pytest.raises(CatalogError, match=r"subject must be 'headwater\.events\.page_view'"):
        load_catalog(path)
    path.write_text(json.dumps({"page_view": {"subject": "headwater.events.page_view", "topic": "t",
                                              "compatibility": "SIDEWAYS", "versions": ["v1.avsc"]}}))
    with pytest.raises(CatalogError, match="compatibility must be one of"):
        load_catalog(path)
    latest = CATALOG.event_types["page_view"].latest_version  # from the catalog: a new version must not break this
    with pytest.raises(CatalogError, match=rf"versions 1\.\.{latest}, not {latest + 1}"):
        CATALOG.event_types["page_view"].schema(latest + 1)
