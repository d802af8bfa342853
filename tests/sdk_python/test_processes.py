"""Process-level guarantees against a local protocol server: kill -9 and restart on the same spool, and fork."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import headwater
import pytest

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration

PRODUCER = """
import sys, headwater
url, spool, start, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = headwater.Client(url, "k", spool_dir=spool, linger_s=0.005, spool_fsync="never", retry_base_s=0.01)
print("producer", c.producer_id, flush=True)
for i in range(start, start + count):
    c.track("load", {"i": i})
print("closed", c.close(60), flush=True)
"""


def run_producer(script: Path, url: str, spool: Path, start: int, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(script), url, str(spool), str(start), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_kill_9_then_restart_on_the_same_spool_delivers_every_seq(tmp_path: Path) -> None:
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    spool = tmp_path / "spool"
    with LocalGateway(delay_s=0.02) as gw:
        first = run_producer(script, gw.url, spool, 0, 200_000)
        try:
            deadline = time.monotonic() + 60
            while len(gw.seen) < 200 and time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.05)
            assert len(gw.seen) >= 200, first.stderr.read() if first.stderr else ""
            os.kill(first.pid, signal.SIGKILL)
        finally:
            first.wait(30)
        assert first.returncode == -signal.SIGKILL
        pending = list((spool / "batches").glob("*.hwb"))
        assert pending, "the kill should leave unacknowledged batches in the spool"
        second = run_producer(script, gw.url, spool, 10**6, 100)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, err
        assert "closed True" in out
    producers = {p for p, _ in gw.seen}
    assert len(producers) == 1  # the restart continued as the same producer
    first_run = {e["seq"] for e in gw.events if e["properties"]["i"] < 10**6}
    restarted = {e["seq"]: e["properties"]["i"] for e in gw.events if e["properties"]["i"] >= 10**6}
    assert min(restarted) > max(first_run)  # a seq is never handed out twice, not even after kill -9
    assert sorted(set(restarted.values())) == list(range(10**6, 10**6 + 100))
    assert not list((spool / "batches").glob("*.hwb"))
    spooled_seqs = {s for path in pending for s in range(*map(int, path.name.split("-")[:2]))}
    assert spooled_seqs <= first_run  # every batch the kill left in the spool was delivered by the restart


EXITS_WITHOUT_CLOSE = """
import sys, headwater
c = headwater.Client(sys.argv[1], "k", linger_s=30, exit_timeout_s=30)
for i in range(123):
    c.track("exit_event", {"i": i})
"""


def test_interpreter_exit_flushes_open_clients(tmp_path: Path) -> None:
    script = tmp_path / "exits.py"
    script.write_text(EXITS_WITHOUT_CLOSE)
    with LocalGateway() as gw:
        done = subprocess.run([sys.executable, str(script), gw.url], capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stderr
        assert sorted(e["properties"]["i"] for e in gw.events) == list(range(123))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_sends_its_own_events_and_not_the_parents(tmp_path: Path) -> None:
    result = tmp_path / "child.json"
    with LocalGateway() as gw:
        parent = headwater.Client(gw.url, "k", spool_dir=str(tmp_path / "spool"), linger_s=60)
        for i in range(5):
            parent.track("parent_event", {"i": i})
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                for i in range(3):
                    parent.track("child_event", {"i": i})
                ok = parent.flush(30)
                result.write_text(json.dumps({"ok": ok, "producer": parent.producer_id,
                                              "acked": parent.metrics().acknowledged}))
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        child = json.loads(result.read_text())
        assert parent.close(30)
        parent_producer = parent.producer_id
    assert child["ok"] and child["acked"] == 3 and child["producer"] != parent_producer
    by_type: dict[str, list[tuple[str, int]]] = {}
    for e in gw.events:
        by_type.setdefault(e["event_type"], []).append((e["producer_id"], e["seq"]))
    assert sorted(by_type["child_event"]) == [(child["producer"], s) for s in range(3)]
    assert sorted(by_type["parent_event"]) == [(parent_producer, s) for s in range(5)]  # sent once, by the parent
