"""How the region fault suite reads a pipeline's counts (tests/regions/pipelines.py) from a file sink laid out as
Spark writes one: only the files its `_spark_metadata` log lists, only the run's producers, duplicates seen."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from tests.regions.pipelines import PipelineCount, check_once, committed_files

pytestmark = pytest.mark.unit


def _file(sink: Path, name: str, rows: list[tuple[str, str]]) -> Path:
    path = sink / "date=2026-11-27" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"event_id": [e for e, _ in rows], "producer_id": [p for _, p in rows]}), path)
    return path


def _log(sink: Path, batch: int, entries: list[tuple[str, Path]]) -> None:
    log = sink / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    lines = ["v1", *(json.dumps({"path": f"file://{p}", "action": action, "size": 1}) for action, p in entries)]
    (log / str(batch)).write_text("\n".join(lines) + "\n")


def _count(sink: Path, producers: set[str]) -> PipelineCount:
    return PipelineCount("a", sink, producers).refresh()


def test_only_committed_files_of_the_runs_producers_count(tmp_path: Path) -> None:
    sink = tmp_path / "events"
    assert committed_files(sink) == [] and not _count(sink, {"p1"}).counts  # nothing committed yet
    one = _file(sink, "part-1.parquet", [("e1", "p1"), ("e2", "p1"), ("x1", "other")])
    two = _file(sink, "part-2.parquet", [("e3", "p2")])
    _file(sink, "part-3.parquet", [("e4", "p1")])  # a killed batch's file: not in the log
    _log(sink, 0, [("add", one)])
    _log(sink, 1, [("add", two)])
    (sink / "_spark_metadata" / ".2.tmp").write_text("v1\n")  # an entry being written
    count = _count(sink, {"p1", "p2"})
    assert count.distinct() == {"e1", "e2", "e3"} and count.twice() == 0
    assert "counted 3" in check_once(count, {"e1", "e2", "e3"})


def test_a_duplicate_a_missing_or_an_unacknowledged_event_fails_the_check(tmp_path: Path) -> None:
    sink = tmp_path / "events"
    one = _file(sink, "part-1.parquet", [("e1", "p1"), ("e2", "p1")])
    again = _file(sink, "part-2.parquet", [("e2", "p1")])
    _log(sink, 0, [("add", one), ("add", again)])
    count = _count(sink, {"p1"})
    assert count.twice() == 1
    with pytest.raises(AssertionError, match="counted twice 1"):
        check_once(count, {"e1", "e2"})
    _log(sink, 1, [("delete", again)])
    count.refresh()
    assert count.twice() == 0
    with pytest.raises(AssertionError, match="missing 1"):
        check_once(count, {"e1", "e2", "e3"})
    with pytest.raises(AssertionError, match="not acknowledged 1"):
        check_once(count, {"e1"})
