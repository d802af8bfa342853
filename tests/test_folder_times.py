"""The folder-times plugin (tests/support/times.py): durations summed per test folder, tests counted once."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

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
