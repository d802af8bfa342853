"""Removes what a query stopped in its first micro-batch left in its checkpoint, which Spark would refuse to start over.

Spark writes each entry of a checkpoint's offset and commit logs to a temp file (`.0.<uuid>.tmp`) and renames
it. Without Hadoop's native library (pyspark has none), creating that file forks `chmod`, and that wait can be
interrupted. So a query stopped during its first batch (the job restarting its queries for a new schema, or
Ctrl-C) can leave the temp file behind, with no entry in the log. Spark then sees no batch, takes the
checkpoint for a new one, and refuses a new checkpoint whose `offsets` or `commits` folder is not empty
(STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY) on every start after. Such a temp file is never a log entry:
Spark's logs read only files named by batch number. This module deletes only those temp files, and only while
the log has no entry yet. Anything else is left for Spark to report.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import SparkSession

from spark_pipeline.config import join

# HDFSMetadataLog's temp file for batch N, and the checksum file Hadoop's local file system may add beside it.
_TEMP_ENTRY = re.compile(r"\.{1,2}\d+\.[0-9a-f-]{36}\.tmp(\.crc)?")
_LOGS = ("offsets", "commits")


def hadoop_path(spark: SparkSession, location: str) -> tuple[Any, Any]:
    """(Hadoop FileSystem, Path) of `location`: a local path or any URI the session's Hadoop configuration reads."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a live session always has its gateway
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def clear_interrupted_first_batch(spark: SparkSession, checkpoint: str) -> list[str]:
    """Delete the temp log files of a first batch that never reached the offset log; return their names."""
    fs, offsets = hadoop_path(spark, join(checkpoint, "offsets"))
    if not fs.exists(offsets) or any(s.getPath().getName().isdigit() for s in fs.listStatus(offsets)):
        return []  # a new checkpoint, or one Spark resumes from its log (it skips temp files then)
    removed = []
    for name in _LOGS:
        _, folder = hadoop_path(spark, join(checkpoint, name))
        if not fs.exists(folder):
            continue
        for status in fs.listStatus(folder):
            if _TEMP_ENTRY.fullmatch(status.getPath().getName()):
                fs.delete(status.getPath(), False)
                removed.append(f"{name}/{status.getPath().getName()}")
    return sorted(removed)
