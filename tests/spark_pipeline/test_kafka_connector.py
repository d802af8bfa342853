"""Spark tests of the connector jars: the Kafka source honours read_committed and from_avro decodes framed events."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import fastavro
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from common.avro_frame import frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration]

SCHEMA = {"type": "record", "name": "probe", "namespace": "headwater.test",
          "fields": [{"name": "id", "type": "string"}, {"name": "n", "type": "long"}]}


def _topic(bootstrap: str) -> str:
    name = f"test.spark.{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)]).values():
        fut.result(30)
    return name


def _framed(record: dict[str, object], schema_id: int) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA), record)
    return frame(schema_id, buf.getvalue())


def _produce(bootstrap: str, topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"spark-test-{uuid.uuid4()}",
                         "enable.idempotence": True, "acks": "all"})
    producer.init_transactions(30)
    for outcome, n in (("committed", 3), ("aborted", 2), ("committed", 2)):
        producer.begin_transaction()
        for i in range(n):
            producer.produce(topic, key=f"k{i}".encode(), value=_framed({"id": outcome, "n": i}, 7))
        if outcome == "aborted":
            producer.flush(10)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


def test_batch_read_is_read_committed_and_from_avro_decodes(spark: SparkSession, bootstrap: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    topic = _topic(bootstrap)
    _produce(bootstrap, topic)
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("endingOffsets", "latest")
           .option("kafka.isolation.level", "read_committed").load())
    decoded = raw.select(
        F.expr("cast(conv(hex(substring(value, 2, 4)), 16, 10) as int)").alias("schema_id"),
        from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("event"),
    ).select("schema_id", "event.id", "event.n")
    rows = sorted((r["schema_id"], r["id"], r["n"]) for r in decoded.collect())
    assert rows == sorted([(7, "committed", 0), (7, "committed", 1), (7, "committed", 2),
                           (7, "committed", 0), (7, "committed", 1)])


def test_streaming_query_reads_committed_records_only(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    topic = _topic(bootstrap)
    _produce(bootstrap, topic)
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("kafka.isolation.level", "read_committed").load())
    query = (stream.selectExpr("CAST(key AS STRING) AS key").writeStream.format("parquet")
             .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None
    keys = sorted(r["key"] for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert keys == ["k0", "k0", "k1", "k1", "k2"]
