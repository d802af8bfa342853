"""`python -m stack tail <topic>`: a topic's newest records, decoded, one JSON object per line (and, with
`--follow`, every record after them until Ctrl-C).

Values in Confluent framing (events, aggregates, rule outputs) are read with their writer schema from the
registry; others (dead letters) as JSON, else as text. Only committed records are shown (read_committed).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from common.avro_frame import FrameError, WriterSchemas
from common.kafka_read import KafkaReadError, consumer_config, drain, partitions, watermarks
from common.kafka_security import KafkaSecurity
from common.registry_client import RegistryClient, RegistryClientError


def decode_value(value: bytes | None, schemas: WriterSchemas) -> Any:
    """The value as data: Avro read with its writer schema, else JSON, else text (never raises)."""
    if value is None:
        return None
    if value[:1] == b"\x00" and len(value) >= 5:
        try:
            return schemas.decode(value)
        except (FrameError, RegistryClientError):
            pass
    try:
        return json.loads(value)
    except ValueError:
        return value.decode("utf-8", errors="replace")


def _text(raw: str | bytes | None) -> str:
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw or ""


def as_json(msg: Message, schemas: WriterSchemas) -> str:
    """One record as a JSON line: where it is, when it was written, its key, headers and decoded value."""
    _, ms = msg.timestamp()
    doc = {
        "partition": msg.partition(), "offset": msg.offset(),
        "timestamp": dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds"),
        "key": _text(msg.key()) or None,
        "headers": {str(h[0]): _text(h[1]) for h in msg.headers() or []},
        "value": decode_value(msg.value(), schemas),
    }
    return json.dumps(doc, default=str, ensure_ascii=False)


def newest(bootstrap: str, topic: str, last: int,
           security: KafkaSecurity) -> tuple[list[Message], dict[int, int], Consumer]:
    """The `last` newest committed records of `topic` (by timestamp over all partitions), the end offsets they were
    read up to, and the consumer (the caller closes it)."""
    consumer = Consumer({**consumer_config(bootstrap), **security.librdkafka()})
    try:
        marks = watermarks(consumer, topic, partitions(consumer, topic))
        starts = {p: max(low, high - last) for p, (low, high) in marks.items()}
        ends = {p: high for p, (_, high) in marks.items()}
        records = sorted(drain(consumer, topic, starts, ends), key=lambda m: (m.timestamp()[1], m.partition()))
    except BaseException:
        consumer.close()
        raise
    return records[-last:] if last else [], ends, consumer


def tail(bootstrap: str, registry: RegistryClient, topic: str, *, last: int, follow: bool,
         say: Callable[[str], None], security: KafkaSecurity | None = None) -> None:
    """Print the newest `last` records, then (with `follow`) every new one until interrupted; KafkaReadError."""
    schemas = WriterSchemas(registry)
    records, ends, consumer = newest(bootstrap, topic, last, security or KafkaSecurity())
    try:
        for msg in records:
            say(as_json(msg, schemas))
        if not follow:
            return
        consumer.assign([TopicPartition(topic, p, off) for p, off in sorted(ends.items())])
        while True:
            for msg in consumer.consume(100, timeout=1.0):
                err = msg.error()
                if err is None:
                    say(as_json(msg, schemas))
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise KafkaReadError(f"reading {topic}: {err.str()}")
    finally:
        consumer.close()
