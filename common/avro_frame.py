"""Confluent-framed Avro: the frame (magic 0, 4-byte big-endian schema id, Avro binary) and decoding by writer schema.

`WriterSchemas` fetches each writer schema from a Confluent-compatible registry by id (`GET /schemas/ids/<id>`)
once, parses it with fastavro and keeps it; `decode` strips the frame and reads the body with it.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from common.registry_client import RegistryClient

MAGIC = 0
HEADER_BYTES = 5


class FrameError(ValueError):
    """A value is not Confluent-framed Avro, or its body does not read with its writer schema."""


def header(schema_id: int) -> bytes:
    """The frame's first HEADER_BYTES: magic byte 0 and the schema id as 4 big-endian bytes (an encoder that
    writes the body into a buffer of its own starts it with these)."""
    return b"\x00" + schema_id.to_bytes(4, "big")


def frame(schema_id: int, body: bytes) -> bytes:
    """Magic byte 0, the schema id as 4 big-endian bytes, the Avro binary."""
    return header(schema_id) + body


def schema_id_of(value: bytes) -> int:
    """The writer schema id of a framed value; FrameError when `value` is not framed."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC:
        raise FrameError(f"not Confluent-framed (starts {bytes(value[:HEADER_BYTES]).hex() or 'empty'})")
    return int.from_bytes(value[1:HEADER_BYTES], "big")


def body_of(value: bytes) -> bytes:
    """The Avro binary of a framed value, without its header; FrameError when `value` is not framed."""
    schema_id_of(value)
    return value[HEADER_BYTES:]


def read_body(body: bytes, parsed: Any, reader: Any = None) -> Any:
    """The Avro `body` read with the parsed writer schema (and a reader schema, when given); FrameError."""
    try:
        return fastavro.schemaless_reader(io.BytesIO(body), parsed, reader)
    except (EOFError, ValueError, IndexError, KeyError, TypeError, UnicodeDecodeError,
            fastavro.read.SchemaResolutionError) as exc:
        raise FrameError(f"the body does not read with its writer schema: {type(exc).__name__}: {exc}") from None


class WriterSchemas:
    """Writer schemas by registry id, fetched once each (RegistryClientError when the registry cannot say)."""

    def __init__(self, registry: RegistryClient | str) -> None:
        self.registry = RegistryClient(registry) if isinstance(registry, str) else registry
        self._raw: dict[int, Any] = {}
        self._parsed: dict[int, Any] = {}

    def raw(self, schema_id: int) -> Any:
        """The schema as JSON (a dict, list or string)."""
        if schema_id not in self._raw:
            answer = self.registry.call("GET", f"/schemas/ids/{schema_id}")
            try:
                self._raw[schema_id] = json.loads(answer["schema"])
            except (TypeError, KeyError, ValueError) as exc:
                raise FrameError(f"the registry's schema {schema_id} is unreadable: {exc}") from None
        return self._raw[schema_id]

    def parsed(self, schema_id: int) -> Any:
        """The schema parsed by fastavro."""
        if schema_id not in self._parsed:
            self._parsed[schema_id] = fastavro.parse_schema(self.raw(schema_id))
        return self._parsed[schema_id]

    def decode(self, value: bytes) -> Any:
        """A framed value read with its writer schema."""
        return read_body(value[HEADER_BYTES:], self.parsed(schema_id_of(value)))
