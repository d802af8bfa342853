"""Unit tests of benchmark CPU pinning: the plan, finding a process tree, pinning every thread of it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from bench import cpus

pytestmark = pytest.mark.unit


def test_plan_gives_the_measured_process_a_core_of_its_own() -> None:
    plan = cpus.plan(True)
    usable = os.sched_getaffinity(0)
    if len(usable) < 2:
        assert plan is None
        return
    assert plan is not None
    assert len(plan.measured) == 1
    assert plan.measured.isdisjoint(plan.others)
    assert plan.measured | plan.others == usable


def test_plan_disabled() -> None:
    assert cpus.plan(False) is None


def test_descendants_and_pinning_reach_grandchildren_and_their_threads() -> None:
    usable = sorted(os.sched_getaffinity(0))
    # A child that starts a grandchild, which starts a second thread; both sleep until killed.
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
            "'import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start(); "
            "print(flush=True); time.sleep(60)']).wait()")
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        grandchildren: list[int] = []
        for _ in range(200):
            grandchildren = cpus.descendants(child.pid)
            if grandchildren and len(os.listdir(f"/proc/{grandchildren[0]}/task")) >= 2:
                break
            threading.Event().wait(0.05)
        assert len(grandchildren) == 1
        pinned = cpus.pin_process_tree(child.pid, {usable[-1]})
        assert pinned >= 3  # the child's thread, the grandchild's two
        for tid in os.listdir(f"/proc/{grandchildren[0]}/task"):
            assert os.sched_getaffinity(int(tid)) == {usable[-1]}
    finally:
        for pid in cpus.descendants(child.pid):
            os.kill(pid, 9)
        child.kill()
        child.wait()


def test_pinning_a_vanished_process_pins_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert cpus.pin_threads(proc.pid, set(os.sched_getaffinity(0))) == 0
