"""docs/benchmarks is generated from the runs' JSON lines: the generator's tables, `--add`, and that the committed
pages are what the committed runs give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import report

pytestmark = pytest.mark.unit


def test_a_run_becomes_a_dated_table_with_one_more_table_per_list_of_objects(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    run = {"bench": "gateway", "date": "2026-11-24", "note": "n", "json_ratio": 0.71, "events": 123456,
           "avro": {"p99_ms": 12.5}, "points": [{"rate": 1, "ms": {"p99": 2}}, {"rate": 2}]}
    (tmp_path / "runs" / "gateway.jsonl").write_text(json.dumps(run) + "\n" + json.dumps(run) + "\n")
    written = report.generate(tmp_path)
    assert [p.name for p in written] == ["2026-11-24-gateway-1.md", "2026-11-24-gateway-2.md"]
    page = written[0].read_text()
    assert page.startswith("# gateway, 2026-11-24\n\nn\n")
    assert "| `json_ratio` | 0.71 |" in page and "| `events` | 123,456 |" in page and "| `avro.p99_ms` | 12.5 |" in page
    assert "| rate | ms.p99 |" in page and "| 2 |  |" in page
    assert "- [2026-11-24-gateway-2](2026-11-24-gateway-2.md)" in (tmp_path / "README.md").read_text()


def test_add_takes_the_json_lines_of_a_benchmark_output_and_labels_them(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    log = tmp_path / "out.log"
    log.write_text('starting...\n{"kafka_read": 90000, "decode": 70000}\nnot json\n[1, 2]\n')
    assert report.add(log, "spark", "2026-11-24", None, tmp_path) == 1
    (line,) = (tmp_path / "runs" / "spark.jsonl").read_text().splitlines()
    assert json.loads(line) == {"bench": "spark", "date": "2026-11-24", "kafka_read": 90000, "decode": 70000}
    with pytest.raises(report.ReportError, match="--bench"):
        report.add(log, None, None, None, tmp_path)


def test_a_run_without_a_date_is_refused(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "x.jsonl").write_text('{"bench": "x"}\n')
    with pytest.raises(report.ReportError, match="date"):
        report.generate(tmp_path)


def test_the_committed_pages_are_generated_from_the_committed_runs(tmp_path: Path) -> None:
    shutil.copytree(report.DOCS / "runs", tmp_path / "runs")
    for note in report.DOCS.glob(report.DATED_PAGE):  # the hand-written notes the index lists
        if not report.RUN_PAGE.fullmatch(note.name):
            shutil.copy(note, tmp_path / note.name)
    report.generate(tmp_path)
    expected = {p.name: p.read_text() for p in tmp_path.glob("*.md")
                if p.name == "README.md" or report.RUN_PAGE.fullmatch(p.name)}
    committed = {p.name: p.read_text() for p in report.DOCS.glob("*.md")  # hand-written notes aside
                 if p.name == "README.md" or report.RUN_PAGE.fullmatch(p.name)}
    assert committed == expected, "run `make benchmarks-doc`"


def test_hand_written_notes_survive_regeneration(tmp_path: Path) -> None:
    shutil.copytree(report.DOCS / "runs", tmp_path / "runs")
    note = tmp_path / "2026-11-24-gateway-optimisations.md"
    note.write_text("# a log written by hand\n")
    stale = tmp_path / "2020-01-01-gone-1.md"
    stale.write_text("# a page whose run was removed\n")
    report.generate(tmp_path)
    assert note.exists() and not stale.exists()


def test_the_index_orders_runs_by_number_not_by_text(tmp_path: Path) -> None:
    """peers-9 came after peers-15 in the index."""
    shutil.copytree(report.DOCS / "runs", tmp_path / "runs")
    report.generate(tmp_path)
    index = (tmp_path / "README.md").read_text()
    assert index.index("2026-11-24-peers-15]") < index.index("2026-11-24-peers-10]") < index.index(
        "2026-11-24-peers-9]") < index.index("2026-11-24-peers-1]")


def test_the_index_lists_every_dated_page_and_marks_the_hand_written_notes(tmp_path: Path) -> None:
    shutil.copytree(report.DOCS / "runs", tmp_path / "runs")
    (tmp_path / "2026-11-24-capacity-runs.md").write_text("# runs collected by hand\n")
    (tmp_path / "2026-11-25-latency-optimisations.md").write_text("# a log of changes\n")
    report.generate(tmp_path)
    index = (tmp_path / "README.md").read_text()
    assert "- [2026-11-24-capacity-runs](2026-11-24-capacity-runs.md) (written by hand)\n" in index
    assert "- [2026-11-25-latency-optimisations](2026-11-25-latency-optimisations.md) (written by hand)\n" in index
    assert "- [2026-11-24-peers-9](2026-11-24-peers-9.md)\n" in index
    assert index.index("2026-11-25-latency-optimisations]") < index.index("2026-11-24-peers-15]")


def test_the_committed_index_lists_every_committed_dated_page() -> None:
    index = (report.DOCS / "README.md").read_text()
    for page in report.DOCS.glob(report.DATED_PAGE):
        assert f"]({page.name})" in index, page.name
