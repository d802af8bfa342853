"""Builds the SparkSession with the Kafka and Avro connector jars that set-up fetched (never downloaded at run time)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from spark_pipeline import packaged

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JARS_DIR = REPO_ROOT / ".headwater" / "jars" / "spark"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
# Spark's default checkpoint file manager renames through Hadoop's FileContext, which on the local file system
# forks `readlink` for every rename (Hadoop's native library is not in pyspark): a micro-batch writes its offset
# and commit logs and each state store's changelog that way. The FileSystem-based manager renames with rename(2).
FILESYSTEM_CHECKPOINT_MANAGER = ("org.apache.spark.sql.execution.streaming.checkpointing."
                                 "FileSystemBasedCheckpointFileManager")
# Task slots of a local session. A real-time query holds one task per Kafka partition it reads and one per shuffle
# partition for as long as it runs (the shared enriched stream: 6 + 1 on the stack's events topic; the real-time
# live aggregates 2; each rule pack 1-2), and a real-time query is admitted only when all of its tasks can start at
# once (16 slots refused the live aggregates beside the others on the stack: "CONCURRENT_SCHEDULER_INSUFFICIENT_SLOT").
# The micro-batch queries need slots beside them. The slots are threads, mostly waiting on Kafka: the number of
# cores is not the bound (SPARK_MASTER overrides it).
DEFAULT_MASTER = "local[32]"


class ConnectorJarsMissing(RuntimeError):
    """The connector jars are not where set-up puts them."""


def connector_jars(jars_dir: Path | None = None) -> list[Path]:
    """The local connector jars (HEADWATER_SPARK_JARS_DIR or .headwater/jars/spark), sorted."""
    folder = Path(os.environ.get("HEADWATER_SPARK_JARS_DIR") or jars_dir or DEFAULT_JARS_DIR)
    jars = sorted(folder.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka") for j in jars):
        raise ConnectorJarsMissing(f"no spark-sql-kafka jar in {folder}: run `make setup`, or set "
                                   "HEADWATER_SPARK_JARS_DIR to a folder of the connector jars")
    return jars


def under_spark_submit() -> bool:
    """Whether this driver was launched by spark-submit (its JVM hands Python the gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(app_name: str, master: str | None = None, shuffle_partitions: int | None = None,
                  extra_conf: dict[str, str] | None = None) -> SparkSession:
    """A session with the pipeline's settings. Run directly (`python -m spark_pipeline`, tests): on `master`
    (SPARK_MASTER, default DEFAULT_MASTER) with the local connector jars and this interpreter for the workers.
    Under spark-submit, the cluster's master, jars (`--jars`/`--packages`), memory and Python stay as given.
    """
    submitted = under_spark_submit()
    if not submitted:
        # Executors' Python workers must use this interpreter (the virtualenv's), or they miss pyarrow & co.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # 1 on a small machine: a stateful stage's fixed cost (state store load and commit) is per partition, and
    # with 2 the live query's micro-batch took 1.0 s instead of 0.75 s here. On a cluster: 2-3x the cores.
    partitions = shuffle_partitions or int(os.environ.get("SPARK_SHUFFLE_PARTITIONS", "1"))
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.session.timeZone", "UTC")
        # Kafka headers become a map (decode.header); a repeated key keeps its last value instead of failing.
        .config("spark.sql.mapKeyDedupPolicy", "LAST_WIN")
        .config("spark.ui.enabled", os.environ.get("SPARK_UI_ENABLED", "false"))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stateStore.providerClass",
                "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
        # Pools (spark_pipeline/data/fairscheduler.xml): the live query's tasks go before the file queries'.
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.scheduler.allocation.file",
                os.environ.get("HEADWATER_FAIR_SCHEDULER_FILE") or str(packaged.local_file(packaged.FAIR_SCHEDULER)))
        # Commit a micro-batch's state by appending a changelog instead of uploading a snapshot of RocksDB.
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        # The logs of a live micro-batch took 60 ms with the FileContext manager's forks, 16 ms without. Sound
        # where rename is atomic (local disks, NFS, HDFS); SPARK_CHECKPOINT_FILE_MANAGER names another class.
        .config("spark.sql.streaming.checkpointFileManagerClass",
                os.environ.get("SPARK_CHECKPOINT_FILE_MANAGER") or FILESYSTEM_CHECKPOINT_MANAGER)
    )
    if not submitted:
        builder = (builder.master(master or os.environ.get("SPARK_MASTER", DEFAULT_MASTER))
                   .config("spark.jars", ",".join(str(j) for j in connector_jars()))
                   .config("spark.driver.memory", os.environ.get("SPARK_DRIVER_MEMORY", "1g")))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if os.environ.get("HEADWATER_SPARK_TRACES", "").strip().lower() not in ("1", "true", "yes"):
        quiet_task_failures(spark)
    return spark


# Spark logs a failing task's exception with its stack trace at each step it passes (the task, the write, the task
# set, the query): pages per failure, and a new schema version fails every query on purpose. The pipeline says each
# query failure in one line instead (the supervisor, the rule manager); HEADWATER_SPARK_TRACES=1 keeps Spark's.
# ErrorNotifier is real-time mode's: it logged "A fatal error has occurred" with a trace each time a rule pack was
# stopped on purpose (its streaming shuffle connection closing), and the failure reaches the query anyway.
TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager", "org.apache.spark.util.Utils",
    "org.apache.spark.sql.execution.datasources.v2.DataWritingSparkTask",
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.AsyncProgressTrackingMicroBatchExecution",
    "org.apache.spark.util.ErrorNotifier",
)


def quiet_task_failures(spark: SparkSession) -> None:
    """Log only FATAL from the loggers that repeat a failing task's stack trace (TASK_FAILURE_LOGGERS)."""
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return
    fatal = jvm.org.apache.logging.log4j.Level.FATAL
    for name in TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, fatal)


@contextmanager
def query_conf(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Start a streaming query inside this to give it `settings` (SQL confs) and no other query.

    A query keeps the session confs it started with (it runs on a clone of the session), so the session's own
    values are restored afterwards.
    """
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
