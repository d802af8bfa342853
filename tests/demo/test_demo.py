"""`make demo`'s parts: it sends nothing before the pipeline's queries run (however long Spark takes), it shows
the tables whole (or says they were cut), and it ends with a count that does not read as lost events."""

from __future__ import annotations

import datetime as dt
import io
import os
import threading
from pathlib import Path
from typing import IO

import pytest

from demo.pipeline import PipelineExited, PipelineOutput, wait_caught_up
from demo.summary import counted, describe
from tests.support.wait import wait_for

pytestmark = pytest.mark.unit
EXPECTED = ("events", "aggregates_live", "console")


class Said:
    """Progress lines, and an event once `n` of them came."""

    def __init__(self, n: int) -> None:
        self.lines: list[str] = []
        self.enough = threading.Event()
        self.n = n

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if len(self.lines) >= self.n:
            self.enough.set()


def _pipe() -> tuple[IO[bytes], IO[bytes]]:
    read, write = os.pipe()
    return os.fdopen(read, "rb"), os.fdopen(write, "wb", buffering=0)


def test_the_demo_waits_for_every_query_however_long_and_says_so(tmp_path: Path) -> None:
    """The demo gave up after 180 s and sent to a pipeline that was not running yet; now only the queries
    starting (or the pipeline ending) ends the wait, and progress is shown meanwhile."""
    stream, child = _pipe()
    shown = io.StringIO()
    output = PipelineOutput(stream, tmp_path / "pipeline.log", out=shown)
    said, result = Said(3), dict[str, float]()
    waiter = threading.Thread(target=lambda: result.update(
        waited=output.wait_running(EXPECTED, said, progress_every_s=0.02)))
    waiter.start()
    child.write(b"26/11/25 INFO job: started query events (checkpoint /x/events)\n")
    assert said.enough.wait(30)
    assert waiter.is_alive(), "the demo stopped waiting before the pipeline's queries ran"
    child.write(b"26/11/25 INFO job: started query aggregates_live (checkpoint /x/l)\nBatch: 0\n|a |b |\n")
    child.write(b"26/11/25 INFO job: started query console (checkpoint /x/c)\nonly showing top 500 rows\n")
    waiter.join(30)
    assert not waiter.is_alive() and result["waited"] > 0
    assert any(line.startswith("waiting for the pipeline: ") and " of 3 queries started" in line
               for line in said.lines)
    child.close()
    output.join(10)
    assert shown.getvalue() == "Batch: 0\n|a |b |\nonly showing top 500 rows\n"  # Spark's cut is never hidden
    assert "started query console" in (tmp_path / "pipeline.log").read_text()


def test_a_pipeline_that_ends_before_its_queries_run_stops_the_wait(tmp_path: Path) -> None:
    stream, child = _pipe()
    output = PipelineOutput(stream, tmp_path / "pipeline.log", out=io.StringIO())
    child.write(b"Exception in thread main: no connector jars\n")
    child.close()
    with pytest.raises(PipelineExited):
        output.wait_running(EXPECTED, lambda line: None, progress_every_s=0.02)


def test_the_closing_count_sums_the_minute_windows_of_the_demo() -> None:
    since = dt.datetime(2026, 11, 25, 19, 40, 30, tzinfo=dt.UTC)

    def row(granularity: str, minute: int, event_type: str, events: int) -> dict[str, object]:
        return {"granularity": granularity, "window_start": dt.datetime(2026, 11, 25, 19, minute, tzinfo=dt.UTC),
                "event_type": event_type, "region": "eu", "events": events}

    rows = [row("1m", 39, "page_view", 1000), row("1m", 40, "page_view", 2000), row("1m", 41, "purchase", 980),
            row("10s", 40, "page_view", 70)]
    assert counted(rows, since) == {"page_view": 2000, "purchase": 980}
    lines = describe(counted(rows, since), 2980, since)
    assert lines == ["the pipeline's 1-minute windows since 19:40 UTC count 2,980 events (page_view 2,000, "
                     "purchase 980); the gateway acknowledged 2,980 of the demo's"]
    assert "not counted yet" in describe({"page_view": 2000}, 2980, since)[1]


def test_the_producers_run_until_a_live_table_shows_their_events(tmp_path: Path) -> None:
    """On a host where Spark's first batch took longer than the producers' minute, no table came while they
    sent; now producing goes on until one does."""
    stream, child = _pipe()
    shown = io.StringIO()
    output = PipelineOutput(stream, tmp_path / "pipeline.log", out=shown)
    said, result = Said(2), dict[str, float]()
    waiter = threading.Thread(target=lambda: result.update(
        waited=output.wait_table(output.tables + 1, said, progress_every_s=0.02)))
    waiter.start()
    assert said.enough.wait(30) and waiter.is_alive()
    # A first batch with no rows (the query ran before the events arrived) is not a live table of them: on a
    # loaded host it came at once, the producers then stopped after their minute and every table with data
    # came after them.
    child.write(b"-------------------------------------------\nBatch: 0\n-------------------------------------------\n"
                b"+---+---+\n|a  |b  |\n+---+---+\n+---+---+\n\n")
    wait_for("the empty table copied", lambda: shown.getvalue().count("+---+---+") == 3, 30)
    assert waiter.is_alive() and output.tables == 0
    child.write(b"Batch: 1\n+---+---+\n|a  |b  |\n+---+---+\n|1  |2  |\n+---+---+\n")
    waiter.join(30)
    assert not waiter.is_alive() and output.tables == 1
    assert "0 of 1 live tables shown" in said.lines[0]


def test_the_demo_waits_until_the_live_query_has_read_every_event() -> None:
    commits = iter([None, {0: 3, 1: 0}, {0: 5, 1: 2}, {0: 5, 1: 4}])
    said: list[str] = []
    wait_caught_up(lambda: next(commits), {0: 5, 1: 4}, lambda: True, said.append, progress_every_s=0.0,
                   poll_s=0.0)
    assert said[0].startswith("waiting for the pipeline to read the last 9 events")
    with pytest.raises(PipelineExited, match="4 events unread"):
        wait_caught_up(lambda: {0: 5, 1: 0}, {0: 5, 1: 4}, lambda: False, said.append, poll_s=0.0)
