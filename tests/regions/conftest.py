"""The `regions` profile on free ports for tests/regions/: both regions (each: one broker, registry, two gateways
behind HAProxy, a subscription server; no Spark) and MirrorMaker 2, up for this folder only, through the same
Regions object a later fault suite uses to stop or restart one region (`stop_region`, `start_region`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stack.haproxy import HAProxy
from stack.regions import Regions, RegionsConfig
from tests.regions.chaos import SUMMARY, load_average
from tests.support.ports import free_port


@pytest.fixture(scope="package")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Regions, dict[str, str]]]:
    """The running profile and its root stack.env (package scope: four JVMs and eight services, not left idling
    through the rest of the session); a machine without HAProxy fails here (`make setup-haproxy`)."""
    HAProxy.binary()
    profile = Regions(RegionsConfig.on_free_ports(tmp_path_factory.mktemp("regions"), free_port))
    try:
        yield profile, profile.up().env
    finally:
        profile.down()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The region fault suite's figures in one block (tests/regions/chaos.py), with the host's load average."""
    if SUMMARY:
        terminalreporter.section("regions-chaos")
        terminalreporter.write_line(f"host load average (1, 5, 15 min) at the end: {load_average()}")
        for line in SUMMARY:
            terminalreporter.write_line(line)
