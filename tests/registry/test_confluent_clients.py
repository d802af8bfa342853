"""confluent-kafka's own SchemaRegistryClient, AvroSerializer and AvroDeserializer against the registry, unchanged."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from common.avro_frame import schema_id_of
from schemas import SCHEMAS_DIR, load_catalog

pytestmark = pytest.mark.integration

PAGE_VIEW = load_catalog().event_types["page_view"]
V1, V2 = PAGE_VIEW.schema_text(1), PAGE_VIEW.schema_text(2)
CTX = SerializationContext("headwater.events", MessageField.VALUE)


def v1_event() -> dict[str, Any]:
    """The example page view without the fields v2 added."""
    event: dict[str, Any] = json.loads((SCHEMAS_DIR / "examples" / "page_view.json").read_text())
    for added in ("load_time_ms", "experiment_ids"):
        del event["properties"][added]
    return event


@pytest.fixture
def client(registry_url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_url})


@pytest.fixture
def subject() -> str:
    """A subject of this test only (the catalog's own subjects are left alone)."""
    return f"test.{uuid.uuid4().hex}.page_view"


def test_register_evolve_and_read_v1_data_with_the_v2_reader(client: SchemaRegistryClient, subject: str,
                                                             registry_url: str) -> None:
    client.set_compatibility(subject, "BACKWARD")
    serializer = AvroSerializer(client, V1, conf={"subject.name.strategy": lambda ctx, name: subject})
    framed = serializer(v1_event(), CTX)
    assert framed is not None and framed[0] == 0
    v1_id = schema_id_of(framed)
    assert client.get_latest_version(subject).version == 1

    v2_id = client.register_schema(subject, Schema(V2, "AVRO"))
    assert v2_id != v1_id
    assert client.get_versions(subject) == [1, 2]

    event = AvroDeserializer(client, V2)(framed, CTX)
    assert event["properties"]["url"] == v1_event()["properties"]["url"]
    assert event["properties"]["load_time_ms"] is None and event["properties"]["experiment_ids"] == []

    fresh = SchemaRegistryClient({"url": registry_url})  # `client` cached "latest" = version 1 above
    latest = AvroSerializer(fresh, V2, conf={"auto.register.schemas": False, "use.latest.version": True,
                                              "subject.name.strategy": lambda ctx, name: subject})
    framed2 = latest({**v1_event(), "properties": {**v1_event()["properties"], "load_time_ms": 12.5,
                                                    "experiment_ids": ["x"]}}, CTX)
    assert framed2 is not None and schema_id_of(framed2) == v2_id
    assert AvroDeserializer(client)(framed2, CTX)["properties"]["experiment_ids"] == ["x"]

    looked_up = client.lookup_schema(subject, Schema(V1, "AVRO"))
    assert (looked_up.version, looked_up.schema_id) == (1, v1_id)


def test_same_schema_under_another_subject_gets_the_same_id(client: SchemaRegistryClient, subject: str) -> None:
    first = client.register_schema(subject, Schema(V1, "AVRO"))
    assert client.register_schema(subject + ".copy", Schema(V1, "AVRO")) == first
    assert client.register_schema(subject, Schema(json.dumps(json.loads(V1)), "AVRO")) == first  # reformatted
    assert client.get_schema(first).schema_str == V1


def test_incompatible_change_is_409_under_backward_and_accepted_under_none(client: SchemaRegistryClient,
                                                                          subject: str) -> None:
    client.set_compatibility(subject, "BACKWARD")
    client.register_schema(subject, Schema(V1, "AVRO"))
    breaking = json.loads(V1)
    breaking["fields"][-1]["type"]["fields"].append({"name": "required_now", "type": "string"})
    candidate = Schema(json.dumps(breaking), "AVRO")
    assert client.test_compatibility(subject, candidate) is False
    with pytest.raises(SchemaRegistryError) as info:
        client.register_schema(subject, candidate)
    assert (info.value.http_status_code, info.value.error_code) == (409, 409)
    assert "required_now" in info.value.error_message and "reader_field_missing_default_value" in \
        info.value.error_message
    answer: object = client.set_compatibility(subject, "NONE")  # typed str, but it is the response body
    assert answer == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    assert client.test_compatibility(subject, candidate) is True
    client.register_schema(subject, candidate)
    assert client.get_versions(subject) == [1, 2]


def test_soft_and_hard_delete(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, Schema(V1, "AVRO"))
    client.register_schema(subject, Schema(V2, "AVRO"))
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    with pytest.raises(SchemaRegistryError) as info:
        client.get_latest_version(subject)
    assert info.value.error_code in (40401, 40402)
    assert client.delete_subject(subject, permanent=True) == [1, 2]


@pytest.mark.parametrize(("call", "status", "code"), [
    (lambda c, s: c.get_schema(2_000_000_000), 404, 40403),
    (lambda c, s: c.get_latest_version(s), 404, 40401),
    (lambda c, s: c.register_schema(s, Schema('{"type": "record", "name": "x"}', "AVRO")), 422, 42201),
    (lambda c, s: c.register_schema(s, Schema("{not json", "AVRO")), 422, 42201),
    (lambda c, s: c.set_compatibility(s, "SIDEWAYS"), 422, 42203),
    (lambda c, s: c.delete_subject(s), 404, 40401),
])
def test_bad_input_gets_confluent_error_codes(client: SchemaRegistryClient, subject: str, call: Any, status: int,
                                              code: int) -> None:
    with pytest.raises(SchemaRegistryError) as info:
        call(client, subject)
    assert (info.value.http_status_code, info.value.error_code) == (status, code)


def test_unknown_version_is_40402(client: SchemaRegistryClient, subject: str) -> None:
    client.register_schema(subject, Schema(V1, "AVRO"))
    with pytest.raises(SchemaRegistryError) as info:
        client.get_version(subject, 99)
    assert (info.value.http_status_code, info.value.error_code) == (404, 40402)


def test_the_launcher_registered_the_catalog(client: SchemaRegistryClient) -> None:
    for et in load_catalog().event_types.values():
        assert client.get_compatibility(et.subject) == et.compatibility
        assert client.get_latest_version(et.subject).version == et.latest_version
        for n in range(1, et.latest_version + 1):
            assert client.lookup_schema(et.subject, Schema(et.schema_text(n), "AVRO")).version == n


def test_record_name_strategy_finds_the_catalog_subjects(client: SchemaRegistryClient) -> None:
    """What an SDK or the gateway does: subject = record full name, schema already registered by the stack."""
    from confluent_kafka.schema_registry import record_subject_name_strategy

    serializer = AvroSerializer(client, V2, conf={"auto.register.schemas": False,
                                                  "subject.name.strategy": record_subject_name_strategy})
    framed = serializer(json.loads((SCHEMAS_DIR / "examples" / "page_view.json").read_text()), CTX)
    assert framed is not None
    expected = client.lookup_schema(PAGE_VIEW.subject, Schema(V2, "AVRO"))
    assert schema_id_of(framed) == expected.schema_id
    assert expected.version == 2
