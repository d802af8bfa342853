"""Reads the events topic (and its mirrored copies) from Kafka: a stream (read_committed, from the checkpoint) or a
bounded batch.

With MIRRORED_EVENTS_TOPICS set, the other regions' events topics as MirrorMaker 2 copies them into this Kafka
are read beside the events topic: one source, so one stream whose rows say which topic each came from (`topic`),
decoded, deduplicated by event_id and aggregated together.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamReader

from spark_pipeline.config import PipelineConfig

# Kafka clients register their metrics as JMX MBeans, which nothing here reads: creating a consumer took tens of
# seconds on a loaded 2-core host (JmxReporter.reregister), and a real-time batch creates one per partition.
NO_JMX = {"kafka.auto.include.jmx.reporter": "false"}


def subscription(cfg: PipelineConfig) -> dict[str, str]:
    """The Kafka source's topic option: the events topic, or with mirrored topics a pattern naming exactly them.

    A subscription by name (`subscribe`) asks the broker to describe every topic in it at each batch and fails the
    query while one does not exist; a mirrored topic exists only once MirrorMaker 2 has created it, which may be
    after the pipeline starts. A pattern lists the topics that exist: a missing one is read from its first offset
    once it appears (Spark's Kafka source reads a partition new to the stream from its earliest offset).
    """
    if not cfg.mirrored_topics:
        return {"subscribe": cfg.events_topic}
    # Java regex: a backslash before any character that is not an ASCII letter or digit is a literal.
    names = ["".join(c if c.isascii() and c.isalnum() else "\\" + c for c in t) for t in cfg.source_topics]
    return {"subscribePattern": f"^(?:{'|'.join(names)})$"}


def _kafka_options(cfg: PipelineConfig) -> dict[str, str]:
    return {
        **cfg.spark_kafka(),
        **subscription(cfg),
        # Aborted gateway transactions (a batch that failed half-way) must never be counted.
        "kafka.isolation.level": "read_committed",
        "includeHeaders": "true",
        # A read_committed range ends at a transaction marker no fetch returns: the task's last fetch then waits
        # the broker's full fetch.max.wait.ms (500 ms by default) before it sees the range is done. Every fetch
        # of a task asks only for offsets below the batch's end, which are committed and readable at once, so
        # the wait never saves a request. Measured on the live query (6 partitions, 2 cores): Kafka stage
        # 1.7 s at 500 ms, 142 ms at 20 ms, 61 ms at 1 ms.
        "kafka.fetch.max.wait.ms": "1",
        **NO_JMX,
    }


def kafka_stream(spark: SparkSession, cfg: PipelineConfig, *, realtime: bool = False) -> DataFrame:
    """The events topic as a stream: `startingOffsets` applies to the first start only, then the checkpoint.

    In real-time mode each task polls its partition for the whole batch: no offset range ends at a transaction
    marker, and a fetch that finds nothing new would come back at once and poll again, so the broker may wait
    for data (`realtime_fetch_wait_ms`; it answers as soon as a record arrives). Real-time mode takes no
    `maxOffsetsPerTrigger`.
    """
    reader: DataStreamReader = spark.readStream.format("kafka").options(**_kafka_options(cfg))
    reader = reader.option("startingOffsets", cfg.starting_offsets)
    if realtime:
        return reader.option("kafka.fetch.max.wait.ms", str(cfg.realtime_fetch_wait_ms)).load()
    return reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger)).load()


def kafka_batch(spark: SparkSession, cfg: PipelineConfig, starting: str = "earliest",
                ending: str = "latest") -> DataFrame:
    """A bounded read: `starting`/`ending` are 'earliest'/'latest' or Spark's per-partition offsets JSON.

    `failOnDataLoss=false`: offsets already deleted by retention are skipped (replay starts at the
    earliest retained one) instead of failing the replay.
    """
    return (spark.read.format("kafka").options(**_kafka_options(cfg))
            .option("startingOffsets", starting).option("endingOffsets", ending)
            .option("failOnDataLoss", "false").load())
