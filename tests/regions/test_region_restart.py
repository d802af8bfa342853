"""A region killed whole (kill -9 of every process) and started again from its disks: MirrorMaker 2 copies both
ways again, with nothing to restart by hand. Runs after tests/regions/test_mirror.py (files run in name order)."""

from __future__ import annotations

import time

import pytest

from stack.regions import Regions
from tests.regions.flows import mirror_once

pytestmark = pytest.mark.integration


def test_a_killed_region_restarted_mirrors_again(regions: tuple[Regions, dict[str, str]]) -> None:
    profile, env = regions
    t0 = time.monotonic()
    profile.kill_region("b")
    assert not any(running for name, running in profile.status().items() if name.startswith("b/"))
    profile.start_region("b")
    print(f"\nregion b killed and started again in {time.monotonic() - t0:.1f} s")
    mirror_once(profile, "a", "b", env["HEADWATER_WRITE_KEY"])
    mirror_once(profile, "b", "a", env["HEADWATER_WRITE_KEY"])
