"""The folder-times plugin (tests/support/times.py): durations summed per test folder, tests counted once; the
chunks of `make test` before pytest (tests/support/chunk.py) above them."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.chunk import read_chunks, run
from tests.support.times import FolderTimes, folder_of

pytestmark = pytest.mark.unit


def test_folder_of_a_node_id() -> None:
    assert folder_of("tests/gateway/test_http.py::test_x[a/b]") == "tests/gateway"
    assert folder_of("test_top.py::test_y") == "."


def test_durations_add_up_per_folder_and_each_test_counts_once() -> None:
    config: Any = SimpleNamespace(option=SimpleNamespace(file_or_dir=[]))
    plugin = FolderTimes(config)
    for nodeid, when, duration in [("tests/a/test_1.py::t", "setup", 2.0), ("tests/a/test_1.py::t", "call", 1.0),
                                   ("tests/a/test_1.py::t", "teardown", 0.5), ("tests/b/test_2.py::u", "call", 0.5)]:
        plugin.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, when=when, duration=duration,  # type: ignore[arg-type]
                                                        skipped=False))
    assert dict(plugin.seconds) == {"tests/a": 3.5, "tests/b": 0.5}
    assert dict(plugin.tests) == {"tests/a": 1, "tests/b": 1}
    lines = plugin.table()
    assert lines[1].split() == ["tests/a", "1", "3.5", "88%"] and lines[-1].startswith("all (wall clock)")


def test_chunks_run_before_pytest_head_the_table_with_the_total(tmp_path: Path) -> None:
    log = tmp_path / "chunks.txt"
    assert run("lint", [sys.executable, "-c", "pass"], log) == 0
    assert run("test-go", [sys.executable, "-c", "raise SystemExit(3)"], log) == 3
    log.write_text(log.read_text() + "half a line\n")
    chunks = read_chunks(log)
    assert [(name, status) for name, _, status in chunks] == [("lint", 0), ("test-go", 3)]
    config: Any = SimpleNamespace(option=SimpleNamespace(file_or_dir=[]))
    lines = FolderTimes(config).table([("lint", 60.0, 0), ("test-go", 30.0, 0)])
    assert lines[1].split() == ["lint", "60.0", "0"] and lines[3].split()[:2] == ["pytest", "(below)"]
    total = lines[4].split()
    assert total[:4] == ["make", "test,", "setup", "excluded"] and 90.0 <= float(total[-1]) < 91.0
    assert lines[6].split()[0] == "folder"
