"""Reads a topic of the running stack back, decoded by each record's writer schema (common/ toolkit)."""

from __future__ import annotations

from typing import Any

from common.avro_frame import WriterSchemas
from common.kafka_read import read_to_end


def latest_rows(env: dict[str, str], topic: str) -> dict[bytes, dict[str, Any]]:
    """The latest record per key of a topic (what a compacted topic converges to), decoded; {} when the topic
    does not exist yet."""
    schemas = WriterSchemas(env["REGISTRY_URL"])
    rows: dict[bytes, dict[str, Any]] = {}
    for msg in read_to_end(env["KAFKA_BOOTSTRAP"], topic, missing_ok=True):
        value = msg.value()
        if value:
            rows[msg.key() or b""] = dict(schemas.decode(value))
    return rows
