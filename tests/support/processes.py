"""Processes a test starts: `python -m <module>`, a check that fails once it exited, a wait until it serves, a stop."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from stack.config import REPO_ROOT
from tests.support.wait import wait_for


def start_service(module: str, env: dict[str, str], out: IO[bytes] | int | None = None, *args: str,
                  cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`python -m <module> [args]` from `cwd` (the repository root by default); output to `out` (a file, PIPE, or
    inherited)."""
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=cwd or REPO_ROOT, stdout=out,
                            stderr=subprocess.STDOUT if out is not None else None)


def running(proc: subprocess.Popen[bytes], log: Path | None = None) -> Callable[[], None]:
    """A check for `wait_for(alive=...)`: fails at once when `proc` has exited, with the tail of its log if given."""
    def alive() -> None:
        if proc.poll() is not None:
            tail = f"; log:\n{log_text(log)[-3000:]}" if log is not None else ""
            raise AssertionError(f"the process exited ({proc.returncode}) before serving{tail}")
    return alive


def wait_serving(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0, *, log: Path | None = None,
                 context: ssl.SSLContext | None = None, interval_s: float = 0.3) -> None:
    """Wait until GET `url` answers 200 (over TLS with `context`); fail at once if the process exits."""
    def serving() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    wait_for(url, serving, timeout_s, interval_s=interval_s, alive=running(proc, log))


def stop(proc: subprocess.Popen[Any], timeout_s: float = 60.0, *, sig: int = signal.SIGTERM, group: bool = False,
         kill_wait_s: float = 10.0) -> None:
    """`sig` (SIGTERM), then SIGKILL if the process has not exited after `timeout_s`; nothing if it already exited.
    `group`: signal its whole process group (a process started with start_new_session, e.g. Spark's JVM below)."""
    if proc.poll() is not None:
        return

    def send(s: int) -> None:
        if group:
            os.killpg(proc.pid, s)
        else:
            proc.send_signal(s)

    send(sig)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        proc.wait(kill_wait_s)


def log_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
