"""Process management: stop() leaves no member of a service's process group behind, even without its leader."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

import pytest

from stack.process import ManagedProcess, StartWatch, _group_members, run_while_busy
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration

SUPERVISOR = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
time.sleep(300)
"""


def test_stop_kills_the_members_left_by_a_crashed_leader(tmp_path: Path) -> None:
    marker = f"hw-test-{uuid.uuid4().hex}"
    proc = ManagedProcess("svc", tmp_path / "svc.pid", marker)
    leader = proc.start([sys.executable, "-c", SUPERVISOR, marker], tmp_path / "svc.log")
    wait_for("both members of the group", lambda: len(_group_members(leader)) == 2, 10)
    child = next(pid for pid in _group_members(leader) if pid != leader)

    os.kill(leader, signal.SIGKILL)  # the supervisor crashes; its worker lives on in the same group
    wait_for("the process to be gone", lambda: proc.pid() is None, 10)
    assert Path(f"/proc/{child}").exists()

    # A later `python -m stack down` knows only the pid file, which pid() removed: stop() must still clean up.
    (tmp_path / "svc.pid").write_text(f"{leader}\n")
    later = ManagedProcess("svc", tmp_path / "svc.pid", marker)
    assert later.stop(timeout_s=5) is True
    assert _group_members(leader) == []
    assert not (tmp_path / "svc.pid").exists()


def test_stop_never_touches_a_group_member_without_the_marker(tmp_path: Path) -> None:
    marker = f"hw-test-{uuid.uuid4().hex}"
    other = ManagedProcess("other", tmp_path / "other.pid", marker)
    leader = other.start([sys.executable, "-c", "import time; time.sleep(300)", marker], tmp_path / "o.log")
    try:
        stale = ManagedProcess("svc", tmp_path / "svc.pid", "a-marker-nobody-has")
        (tmp_path / "svc.pid").write_text(f"{leader}\n")
        assert stale.stop(timeout_s=1) is False
        assert Path(f"/proc/{leader}").exists()
    finally:
        other.stop(timeout_s=5)


@pytest.mark.unit
def test_a_start_that_keeps_logging_is_waited_for_and_a_silent_one_fails(tmp_path: Path) -> None:
    """A broker that took over 90 s to listen on a loaded host was killed mid-start; silence is the failure."""
    log = tmp_path / "logs"
    log.mkdir()
    now = [0.0]
    watch = StartWatch(90, [log], clock=lambda: now[0])
    for _ in range(10):  # ten minutes of start-up, a line logged every minute: waited for
        now[0] += 60
        with (log / "server.log").open("a") as f:
            f.write("starting\n")
        assert not watch.expired()
    now[0] += 89
    assert not watch.expired()
    now[0] += 2  # then 91 s without a line
    assert watch.expired()


def test_a_tool_is_waited_for_while_it_works_and_killed_once_it_hangs() -> None:
    """Formatting three brokers' storage at once on a loaded host took over the fixed 120 s it was given."""
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\nprint('done')"
    done = run_while_busy([sys.executable, "-c", busy], quiet_s=0.5)  # works three times longer than the bound
    assert (done.returncode, done.stdout) == (0, "done\n")
    with pytest.raises(TimeoutError, match="used no CPU"):
        run_while_busy([sys.executable, "-c", "import time; time.sleep(60)"], quiet_s=1.0)
