"""What the rule manager remembers across a crash, beside the rules' checkpoints: the rules running, the rules in
quarantine, and which checkpoint folders no rule owns any more.

Files under `<checkpoints>/rules/_journal/`, on whatever Hadoop file system the checkpoints use, written by the
pipeline only (unlike the Kafka topics, which anyone who reaches the broker can write until it has ACLs):

- `running.json`: the rules whose query runs now (`{name: checkpoint id}`), rewritten when that set changes and
  removed by a clean stop. Found at start, it says the previous run died (a crash, an OOM, `kill -9`).
- `quarantine/<name>.json`: `{"checkpoint": id, "reason": ...}`: that version of the rule is not started again
  until it is applied again (a new checkpoint id) or deleted.

A rule was in a micro-batch when the pipeline died if its checkpoint's offset log holds a batch its commit log
does not (Spark writes the offsets before a batch runs and the commit after it). Checkpoints are
`<root>/<name>/<Rule.checkpoint_id>` (launch.checkpoint); a runtime that lays them out otherwise (several rules per
query) provides its own `in_flight`: this is the manager's `Journal` seam.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession

from spark_pipeline.checkpoint import hadoop_path
from spark_pipeline.config import join
from spark_pipeline.rules.model import NAME_PATTERN, Rule

log = logging.getLogger("spark_pipeline.rules")
FOLDER = "_journal"


class CheckpointJournal:
    """The journal of the rules whose checkpoints are under `root` (launch.rules_checkpoints)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark, self.root = spark, root
        self.folder = join(root, FOLDER)

    # -- small files ---------------------------------------------------------------------------------------------
    def _path(self, *parts: str) -> tuple[Any, Any]:
        return hadoop_path(self.spark, join(self.folder, *parts))

    def _read(self, *parts: str) -> Any:
        fs, path = self._path(*parts)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            jvm = self.spark.sparkContext._jvm
            assert jvm is not None
            text = str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()
        try:
            return json.loads(text)
        except ValueError:
            log.warning("rule journal: %s is not JSON; ignored", "/".join(parts))
            return None

    def _write(self, value: Any, *parts: str) -> None:
        fs, path = self._path(*parts)
        _, temp = self._path(*parts[:-1], f".{parts[-1]}.tmp")
        stream = fs.create(temp, True)
        try:
            stream.write(bytearray(json.dumps(value, sort_keys=True).encode()))
        finally:
            stream.close()
        fs.delete(path, False)
        fs.rename(temp, path)

    def _delete(self, *parts: str) -> None:
        fs, path = self._path(*parts)
        fs.delete(path, True)

    # -- running rules -------------------------------------------------------------------------------------------
    def unclean_running(self) -> dict[str, str]:
        """The rules (name -> checkpoint id) a previous run left running without a clean stop (empty if none)."""
        value = self._read("running.json")
        if not isinstance(value, dict):
            return {}
        return {str(k): str(v) for k, v in value.items() if isinstance(v, str)}

    def record_running(self, running: Mapping[str, str]) -> None:
        self._write(dict(running), "running.json")

    def clean_stop(self) -> None:
        self._delete("running.json")

    def in_flight(self, rule: Rule) -> bool:
        """Whether the rule's checkpoint shows a micro-batch started (offset log) and not committed."""
        location = join(self.root, rule.name, rule.checkpoint_id)
        return _last_batch(self.spark, join(location, "offsets")) > _last_batch(self.spark, join(location, "commits"))

    # -- quarantine ----------------------------------------------------------------------------------------------
    def quarantined(self) -> dict[str, tuple[str, str]]:
        """name -> (checkpoint id, reason) of every rule in quarantine."""
        fs, folder = self._path("quarantine")
        if not fs.exists(folder):
            return {}
        out: dict[str, tuple[str, str]] = {}
        for status in fs.listStatus(folder):
            file_name = str(status.getPath().getName())
            name = file_name.removesuffix(".json")
            value = self._read("quarantine", file_name) if file_name.endswith(".json") else None
            if NAME_PATTERN.fullmatch(name) and isinstance(value, dict):
                out[name] = (str(value.get("checkpoint", "")), str(value.get("reason", ""))[:600])
        return out

    def quarantine(self, rule: Rule, reason: str) -> None:
        self._write({"checkpoint": rule.checkpoint_id, "reason": reason}, "quarantine", f"{rule.name}.json")

    def release(self, name: str) -> None:
        self._delete("quarantine", f"{name}.json")

    # -- orphans -------------------------------------------------------------------------------------------------
    def drop_orphans(self, rules: Mapping[str, Rule]) -> list[str]:
        """Delete the checkpoint folders no stored rule version owns (a rule deleted, or re-applied, while the
        pipeline was down); return what was deleted (`<name>` or `<name>/<checkpoint id>`). Folders whose name is
        not a rule name are the runtime's own (the journal, the packed queries' `_realtime` and `_aggregate_<id>`,
        which hold the packs' offsets and window state): never deleted here."""
        fs, root = hadoop_path(self.spark, self.root)
        if not fs.exists(root):
            return []
        dropped = []
        for status in fs.listStatus(root):
            name = str(status.getPath().getName())
            if not NAME_PATTERN.fullmatch(name) or not status.isDirectory():
                continue
            rule = rules.get(name)
            if rule is None:
                fs.delete(status.getPath(), True)
                dropped.append(name)
                continue
            for version in fs.listStatus(status.getPath()):
                if str(version.getPath().getName()) != rule.checkpoint_id:
                    fs.delete(version.getPath(), True)
                    dropped.append(f"{name}/{version.getPath().getName()}")
        return dropped


def _last_batch(spark: SparkSession, log_dir: str) -> int:
    """The highest batch number in a checkpoint log folder (-1: none)."""
    fs, path = hadoop_path(spark, log_dir)
    if not fs.exists(path):
        return -1
    numbers = [int(str(s.getPath().getName())) for s in fs.listStatus(path) if str(s.getPath().getName()).isdigit()]
    return max(numbers, default=-1)
