"""The pipeline's Kafka options on a secured broker: Spark's connector, given the PIPELINE principal's settings as
`kafka.`-prefixed options (SCRAM in `sasl.jaas.config`, the CA inline), reads the events topic and writes its
aggregates topic; given the console's read-only principal, its write is refused."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer

from spark_pipeline.config import PipelineConfig
from spark_pipeline.extract import kafka_batch
from tests.security.broker import SecureKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def test_spark_reads_and_writes_as_its_principal(secure_kafka: SecureKafka, spark: SparkSession) -> None:
    marker = uuid.uuid4().hex.encode()
    producer = Producer(secure_kafka.config("gateway"))
    producer.produce("headwater.events", marker, b"k")
    assert producer.flush(60) == 0
    cfg = PipelineConfig.from_env(secure_kafka.env("pipeline"))
    values = [bytes(r.value) for r in kafka_batch(spark, cfg).select("value").collect()]
    assert marker in values
    options = cfg.spark_kafka()
    assert "password" not in str(spark.sparkContext.getConf().getAll())  # options stay out of the Spark conf
    (spark.createDataFrame([(b"k", marker)], "key binary, value binary").write.format("kafka")
     .options(**options).option("topic", "headwater.aggregates").save())
    console = PipelineConfig.from_env(secure_kafka.env("console")).spark_kafka()
    with pytest.raises(Exception, match=r"(?i)authoriz"):
        (spark.createDataFrame([(b"k", marker)], "key binary, value binary").write.format("kafka")
         .options(**console).option("topic", "headwater.aggregates").save())
