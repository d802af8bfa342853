"""Reads a topic of the running stack back, decoded by each record's writer schema (common/ toolkit), with the
read-only `tail` principal's credentials when the stack is secured (stack.env's HEADWATER_TAIL_*)."""

from __future__ import annotations

from typing import Any

from common.avro_frame import WriterSchemas
from common.kafka_read import read_to_end, topic_end_offsets
from common.kafka_security import KafkaSecurity
from common.registry_access import RegistryAccess
from common.registry_client import RegistryClient


def latest_rows(env: dict[str, str], topic: str) -> dict[bytes, dict[str, Any]]:
    """The latest record per key of a topic (what a compacted topic converges to), decoded; {} when the topic
    does not exist yet."""
    schemas = WriterSchemas(RegistryClient.of(env["REGISTRY_URL"], RegistryAccess.from_env(env, "TAIL")))
    rows: dict[bytes, dict[str, Any]] = {}
    for msg in read_to_end(env["KAFKA_BOOTSTRAP"], topic, missing_ok=True,
                           security=KafkaSecurity.from_env(env, "TAIL")):
        value = msg.value()
        if value:
            rows[msg.key() or b""] = dict(schemas.decode(value))
    return rows


def end_offsets(env: dict[str, str], topic: str) -> dict[int, int]:
    """partition -> the topic's end offset now."""
    return topic_end_offsets(env["KAFKA_BOOTSTRAP"], topic, security=KafkaSecurity.from_env(env, "TAIL"))
