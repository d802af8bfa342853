"""The `regions` profile on free ports for tests/regions/: both regions (each: one broker, registry, two gateways
behind HAProxy, a subscription server) and MirrorMaker 2, up for this folder only, through the same Regions object
a later fault suite uses to stop or restart one region (`stop_region`, `start_region`); each region's Spark pipeline
too in the full fault suite (`make chaos-regions`: tests/regions/chaos.py's PIPELINES), none in `make test`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from stack.haproxy import HAProxy
from stack.regions import Regions, RegionsConfig
from tests.regions.chaos import ASKED_SCALE, PIPELINE_SCALE_MAX, PIPELINES, SUMMARY, load_average, report
from tests.regions.pipelines import start_pipeline
from tests.support.ports import free_port


@pytest.fixture(scope="package")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Regions, dict[str, str]]]:
    """The running profile and its root stack.env (package scope: four JVMs and eight services, not left idling
    through the rest of the session); a machine without HAProxy fails here (`make setup-haproxy`)."""
    HAProxy.binary()
    profile = Regions(RegionsConfig.on_free_ports(tmp_path_factory.mktemp("regions"), free_port))
    try:
        env = profile.up().env
        if PIPELINES:  # one after the other, as `up` does: each Spark start takes the host's CPU for a while
            t0 = time.monotonic()
            for region in profile.stacks:
                start_pipeline(region)
            capped = f" (HEADWATER_CHAOS_SCALE={ASKED_SCALE} asked, at most {PIPELINE_SCALE_MAX} with the pipelines)" \
                if ASKED_SCALE > PIPELINE_SCALE_MAX else ""
            report(f"both regions' pipelines started in {time.monotonic() - t0:.0f} s{capped}")
        yield profile, env
    finally:
        profile.down()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The region fault suite's figures in one block (tests/regions/chaos.py), with the host's load average."""
    if SUMMARY:
        terminalreporter.section("regions-chaos")
        terminalreporter.write_line(f"host load average (1, 5, 15 min) at the end: {load_average()}")
        for line in SUMMARY:
            terminalreporter.write_line(line)
