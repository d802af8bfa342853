"""The checkpoint journal's clean-up at start (spark_pipeline/rules/journal.py) on a real local file system through
Spark's Hadoop client: folders of rules no longer stored go, the packed queries' folders stay."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from spark_pipeline.rules.journal import CheckpointJournal
from spark_pipeline.rules.model import Rule

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark


def stored(name: str, uid: str) -> Rule:
    return Rule(name=name, sql="SELECT 1", version=1, applied_at=0, applied_by="t", output_schema_id=1, uid=uid)


def test_orphans_go_and_the_packs_checkpoints_stay(spark: SparkSession, tmp_path: Path) -> None:
    kept = stored("kept", "a1")
    for folder in ["gone/v1-x", f"kept/{kept.checkpoint_id}", "kept/v0-old", "_realtime/offsets",
                   "_aggregate_625a265a32/state", "_journal"]:
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "_realtime" / "offsets" / "3").write_text("v1", encoding="utf-8")

    dropped = CheckpointJournal(spark, str(tmp_path)).drop_orphans({"kept": kept})

    assert sorted(dropped) == ["gone", "kept/v0-old"]
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ["_aggregate_625a265a32", "_aggregate_625a265a32/state", "_journal", "_realtime",
                    "_realtime/offsets", "_realtime/offsets/3", "kept", f"kept/{kept.checkpoint_id}"]
