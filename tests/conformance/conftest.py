"""Collects the runner's closing lines (`<target>: N passed, N failed`) and prints them at the end of the session."""

from __future__ import annotations

import pytest

SUMMARIES: list[str] = []


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SUMMARIES:
        terminalreporter.section("conformance")
        for line in SUMMARIES:
            terminalreporter.write_line(line)
