"""A pytest plugin: seconds spent per test folder (setup + call + teardown), shown at the end of a run and written
to .headwater/test-times.txt when the run is the whole suite (no paths given, as `make test` runs it), else to
.headwater/test-times-last.txt, so the next person sees where `make test`'s minutes go. Under `make test` the
chunks before pytest (lint, Go, TypeScript, other Pythons; tests/support/chunk.py) head the table."""

from __future__ import annotations

import datetime as dt
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest
from _pytest.terminal import TerminalReporter

from tests.support.chunk import CHUNKS_ENV, read_chunks

REPO_ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = REPO_ROOT / ".headwater"


def folder_of(nodeid: str) -> str:
    """The folder of a test's file: `tests/gateway/test_http.py::test_x` -> `tests/gateway`."""
    path = nodeid.split("::", 1)[0]
    return path.rsplit("/", 1)[0] if "/" in path else "."


class FolderTimes:
    """Collects report durations by folder; writes the table once the run ends."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)
        self.started = time.monotonic()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        folder = folder_of(report.nodeid)
        self.seconds[folder] += report.duration
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.tests[folder] += 1

    def table(self, chunks: Sequence[tuple[str, float, int]] = ()) -> list[str]:
        """Chunks run before pytest (each with its seconds), then pytest's seconds per folder, then totals."""
        wall = time.monotonic() - self.started
        lines: list[str] = []
        if chunks:
            lines.append(f"{'chunk of make test':<32} {'':>6} {'seconds':>9} {'status':>6}")
            lines += [f"{name:<32} {'':>6} {seconds:>9.1f} {status:>6}" for name, seconds, status in chunks]
            lines.append(f"{'pytest (below)':<32} {'':>6} {wall:>9.1f}")
            lines.append(f"{'make test, setup excluded':<32} {'':>6} {wall + sum(c[1] for c in chunks):>9.1f}")
            lines.append("")
        lines.append(f"{'folder':<32} {'tests':>6} {'seconds':>9} {'share':>6}")
        total = sum(self.seconds.values()) or 1.0
        for folder, seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1]):
            lines.append(f"{folder:<32} {self.tests[folder]:>6} {seconds:>9.1f} {seconds / total:>6.0%}")
        lines.append(f"{'all (wall clock)':<32} {sum(self.tests.values()):>6} {wall:>9.1f}")
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: TerminalReporter) -> None:
        if not self.seconds:
            return
        whole = not self.config.option.file_or_dir
        log = os.environ.get(CHUNKS_ENV)
        lines = self.table(read_chunks(Path(log)) if whole and log else [])
        terminalreporter.section("seconds per test folder")
        for line in lines:
            terminalreporter.write_line(line)
        target = OUT_DIR / ("test-times.txt" if whole else "test-times-last.txt")
        try:
            OUT_DIR.mkdir(exist_ok=True)
            args = " ".join(self.config.invocation_params.args) or "(no arguments)"
            stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
            target.write_text(f"# pytest {args}\n# {stamp}\n" + "\n".join(lines) + "\n")
            terminalreporter.write_line(f"(written to {target.relative_to(REPO_ROOT)})")
        except OSError as exc:  # a read-only checkout: the terminal has the table
            terminalreporter.write_line(f"(not written: {exc})")


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(FolderTimes(config), "headwater-folder-times")
