"""A new event type registered in the running registry reaches the running gateway without a restart (issue 19)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from typing import Any

import pytest

from common.avro_frame import schema_id_of
from stack.topics import EVENTS_TOPIC
from tests.gateway.helpers import (
    avro_batch,
    avro_event,
    avro_record,
    batch,
    dumps,
    event_type_schema,
    http_post,
    json_headers,
    page_view,
    zstd,
)
from tests.support.kafka import consume_all, end_offsets

pytestmark = pytest.mark.integration


def _register(registry_url: str, subject: str, schema_text: str) -> int:
    req = urllib.request.Request(f"{registry_url}/subjects/{subject}/versions", method="POST",
                                 data=json.dumps({"schema": schema_text}).encode(),
                                 headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.loads(resp.read())["id"])


def _event(event_type: str, marker: str, seq: int) -> dict[str, Any]:
    return page_view(seq, marker, event_type=event_type, properties={"plan": marker})


def test_a_type_registered_while_the_gateway_runs_is_accepted_on_both_paths(
        gateway_url: str, write_key: str, bootstrap: str, registry_url: str) -> None:
    marker = uuid.uuid4().hex
    event_type = f"signup_{marker[:12]}"
    start = end_offsets(bootstrap, EVENTS_TOPIC)
    schema = event_type_schema(event_type)
    schema_id = _register(registry_url, f"headwater.events.{event_type}", schema)
    # JSON: the type is discovered on the miss (no restart, no refresh period to wait for).
    status, body, _ = http_post(gateway_url + "/v1/batch", zstd(dumps(batch(_event(event_type, marker, 0)))),
                                json_headers(write_key))
    assert status == 200 and body["accepted"] == 1, body
    # Avro: the id is checked to be a version of the type's subject, then accepted (on any worker).
    framed = avro_event(schema, schema_id, avro_record(_event(event_type, marker, 1)) | {
        "properties": {"plan": marker}})
    for _ in range(2):
        status, body, _ = http_post(gateway_url + "/v1/batch", zstd(avro_batch([framed])),
                                    json_headers(write_key, ctype="application/vnd.headwater.batch+avro"))
        assert status == 200 and body["accepted"] == 1, body
    records = [r for r in consume_all(bootstrap, EVENTS_TOPIC, "read_committed", 3, start=start)
               if marker.encode() in (r.value() or b"")]
    assert len(records) == 3
    assert {schema_id_of(r.value() or b"") for r in records} == {schema_id}


def test_an_id_registered_under_another_subject_is_refused(
        gateway_url: str, write_key: str, registry_url: str) -> None:
    """Issue 14 item 2 against the real registry: an event-looking schema under a foreign subject."""
    marker = uuid.uuid4().hex
    event_type = f"spoof_{marker[:12]}"
    schema = event_type_schema(event_type)
    _register(registry_url, f"headwater.events.{event_type}", schema)
    spoof = schema.replace('"type": "string"}]}}', '"type": "long"}]}}')  # `plan` as a long: incompatible
    assert spoof != schema
    spoof_id = _register(registry_url, f"attacker-{marker}", spoof)
    record = avro_record(_event(event_type, marker, 0)) | {"properties": {"plan": 7}}
    framed = avro_event(spoof, spoof_id, record)
    status, body, _ = http_post(gateway_url + "/v1/batch", zstd(avro_batch([framed])),
                                json_headers(write_key, ctype="application/vnd.headwater.batch+avro"))
    assert status == 422 and body["accepted"] == 0, body
    assert body["rejected"][0]["code"] == "unknown_schema_id"
