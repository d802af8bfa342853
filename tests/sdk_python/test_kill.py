"""kill -9 at random moments, right after a burst included, against the spool's promises (issue 15, points 2 and 11).

A producer process writes each seq `track()` returned to a file (after the call returned), and is killed with
SIGKILL; a second producer then starts on the same spool, delivers what the first left there, and closes.
Checks, against a local protocol server:
- durability `sync`: every seq `track()` returned before the kill is delivered;
- durability `async`: every event tracked at least a second (20x `linger_s`) before the kill is delivered;
- always: the restart is the same producer, and no seq is ever handed out twice (a seq is never reused).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.wait import wait_for

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration

PRODUCER = """
import os, sys, time, headwater
url, spool, mode, out, burst = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
c = headwater.Client(url, "k", spool_dir=spool, durability=mode, spool_fsync="never", linger_s=0.05,
                     retry_base_s=0.01, retry_max_s=0.05)
fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.write(fd, b"start\\n")
for i in range(burst):
    os.write(fd, b"%d\\n" % c.track("load", {"i": i, "phase": "burst"}))
os.write(fd, b"burst\\n")
time.sleep(1.0)
os.write(fd, b"settled\\n")
i = burst
while True:
    os.write(fd, b"%d\\n" % c.track("load", {"i": i, "phase": "trickle"}))
    i += 1
    time.sleep(0.001)
"""

RESTART = """
import sys, headwater
c = headwater.Client(sys.argv[1], "k", spool_dir=sys.argv[2], retry_base_s=0.01, retry_max_s=0.05)
seqs = [c.track("after", {"i": i}) for i in range(10)]
print("seqs", *seqs)
print("closed", c.close(60), flush=True)
"""


def lines(path: Path) -> list[str]:
    return path.read_text().split("\n")[:-1] if path.exists() else []  # a torn last line is dropped


def wait_line(path: Path, marker: str, timeout: float = 60) -> None:
    """Wait until the producer wrote `marker` as a whole line (polled every 2 ms: the kill's moment matters)."""
    wait_for(repr(marker), lambda: marker in lines(path), timeout, interval_s=0.002)


def kill_and_restart(tmp_path: Path, mode: str, moment: str, rng: random.Random) -> None:
    (tmp_path / "producer.py").write_text(PRODUCER)
    (tmp_path / "restart.py").write_text(RESTART)
    spool, out = tmp_path / "spool", tmp_path / "seqs.txt"
    with LocalGateway(delay_s=0.01) as gw:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "producer.py"), gw.url, str(spool), mode, str(out),
                                 "3000"], stderr=subprocess.PIPE, text=True)
        try:
            wait_line(out, "start")
            if moment == "after_burst":
                wait_line(out, "burst")
            elif moment == "after_settle":
                wait_line(out, "settled")
                time.sleep(rng.uniform(0, 0.2))
            else:
                time.sleep(rng.uniform(0.0, 1.5))
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
        text = lines(out)
        returned = [int(x) for x in text if x.isdigit()]
        burst_seqs = returned[:3000] if "settled" in text else []
        again = subprocess.run([sys.executable, str(tmp_path / "restart.py"), gw.url, str(spool)],
                               capture_output=True, text=True, timeout=120, check=False)
        assert again.returncode == 0, again.stderr
        assert "closed True" in again.stdout, again.stdout + again.stderr
        after = [int(x) for x in again.stdout.split("seqs", 1)[1].split("closed")[0].split()]
    seen = {seq for _, seq in gw.seen}
    assert len({p for p, _ in gw.seen}) == 1  # the restart continued as the same producer
    assert returned == sorted(set(returned))  # handed out once each, in order
    assert min(after) > max(returned, default=-1)  # never reused after the kill
    assert set(after) <= seen
    if mode == "sync":
        assert set(returned) <= seen, sorted(set(returned) - seen)[:20]
    assert set(burst_seqs) <= seen, sorted(set(burst_seqs) - seen)[:20]


@pytest.mark.parametrize("moment", ["random", "after_burst", "random", "after_settle"])
def test_sync_durability_keeps_every_returned_seq_through_kill_9(tmp_path: Path, moment: str) -> None:
    kill_and_restart(tmp_path, "sync", moment, random.Random())


@pytest.mark.parametrize("moment", ["random", "after_burst", "after_settle", "after_settle"])
def test_async_durability_spools_a_burst_within_its_linger_and_never_reuses_seqs(tmp_path: Path,
                                                                                 moment: str) -> None:
    kill_and_restart(tmp_path, "async", moment, random.Random())
