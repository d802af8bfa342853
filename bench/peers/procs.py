"""The processes of a peers run: CPU seconds of a process tree from /proc, and the peer's own process."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

from bench.cpus import descendants

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of `pid` and its living descendants (every thread; /proc/<pid>/stat)."""
    if pid is None:
        return 0.0
    total = 0
    for proc in (pid, *descendants(pid)):
        try:
            fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
    return total / _TICK


class Peer:
    """The Benthos process, started on `cpus` (its Go runtime then sizes GOMAXPROCS to them)."""

    def __init__(self, binary: Path, config: Path, port: int, log: Path, cpus: set[int] | None) -> None:
        self.binary, self.config, self.port, self.log, self.cpus = binary, config, port, log, cpus
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        # taskset (util-linux) sets the mask before Go starts, so its runtime sizes GOMAXPROCS to it.
        pin = ["taskset", "-c", ",".join(str(c) for c in sorted(self.cpus))] if self.cpus else []
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen([*pin, str(self.binary), "-c", str(self.config)], stdout=out, stderr=out,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the peer exited with {self.proc.returncode}; see {self.log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the peer did not listen on port {self.port} within {timeout_s:.0f} s; see {self.log}")

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
