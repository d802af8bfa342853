"""A private gateway process for measurements, and what /proc says about it (CPU seconds, RSS, sockets).

The measurements (ack-latency curve, memory per connection, recycling spread) start their own `python -m
gateway` on a free port against the stack's Kafka and registry, with the worker count and connection settings
each needs, and stop it afterwards. Linux only (/proc).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common.ports import free_port
from common.write_keys import key_entry
from loadtest.settings import REPO_ROOT

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")



def children(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc/<pid>/task/*/children)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found.extend(int(c) for c in task.read_text().split())
        except OSError:
            continue
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (0 if it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
    except OSError:
        return 0


def open_sockets(pid: int) -> int:
    """How many sockets the process holds open."""
    count = 0
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                count += os.readlink(fd).startswith("socket:")
            except OSError:
                continue
    except OSError:
        return 0
    return count


@dataclass(frozen=True)
class Gateway:
    """A running private gateway: its URL, write key, supervisor pid and worker pids."""

    url: str
    write_key: str
    pid: int

    def workers(self) -> list[int]:
        """The processes that serve requests: the supervisor's children, or the process itself with one worker."""
        return children(self.pid) or [self.pid]


@contextmanager
def private_gateway(stack_env: Mapping[str, str], workers: int, extra: Mapping[str, str] | None = None,
                    log_path: Path | None = None, ready_timeout_s: float = 60.0) -> Iterator[Gateway]:
    """Start `python -m gateway` on a free loopback port against the stack's Kafka and registry; stop it after."""
    port = free_port()
    key = f"hw_lt_{secrets.token_urlsafe(24)}"
    env = {**os.environ, "KAFKA_BOOTSTRAP": stack_env["KAFKA_BOOTSTRAP"], "REGISTRY_URL": stack_env["REGISTRY_URL"],
           "HEADWATER_GATEWAY_HOST": "127.0.0.1", "HEADWATER_GATEWAY_PORT": str(port),
           "HEADWATER_GATEWAY_WORKERS": str(workers),
           "HEADWATER_GATEWAY_WRITE_KEYS": key_entry(key, "loadtest"),
           "HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX": f"headwater-loadtest-{port}",
           "HEADWATER_GATEWAY_LOG_LEVEL": "WARNING", "PYTHONPATH": str(REPO_ROOT), **(extra or {})}
    log = (log_path or Path(os.devnull)).open("ab")
    proc = subprocess.Popen([sys.executable, "-m", "gateway"], env=env, cwd=REPO_ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(proc, url, ready_timeout_s)
        yield Gateway(url, key, proc.pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the gateway exited with status {proc.returncode} during start-up")
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the gateway at {url} was not ready within {timeout_s:g}s")
