"""Starting a real `python -m gateway` (or another service) for a test: its environment, start, wait and stop."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from stack.config import REPO_ROOT
from tests.support.keys import WRITE_KEY, gateway_keys
from tests.support.ports import free_port
from tests.support.wait import wait_for


def gateway_env(bootstrap: str, registry_url: str, port: int | None = None, key: str = WRITE_KEY,
                **settings: str) -> dict[str, str]:
    """The process environment of a gateway on `port` (a free one by default) accepting `key` as source dev."""
    return {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
            "HEADWATER_GATEWAY_PORT": str(port or free_port()), **gateway_keys(key), **settings}


def start_service(module: str, env: dict[str, str], out: IO[bytes] | int | None = None,
                  *args: str) -> subprocess.Popen[bytes]:
    """`python -m <module> [args]` from the repository root; output to `out` (a file, PIPE, or inherited)."""
    return subprocess.Popen([sys.executable, "-m", module, *args], env=env, cwd=REPO_ROOT, stdout=out,
                            stderr=subprocess.STDOUT if out is not None else None)


def start_gateway(env: dict[str, str], out: IO[bytes] | int | None = None, *args: str) -> subprocess.Popen[bytes]:
    """`python -m gateway [args]` from the repository root; output to `out` (a file, PIPE, or inherited)."""
    return start_service("gateway", env, out, *args)


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


def wait_live(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    """Wait until the gateway answers /livez; fail at once if the process exits."""
    wait_serving(url + "/livez", proc, timeout_s)


def stop(proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """SIGTERM, then SIGKILL if the process has not exited after `timeout_s`."""
    proc.terminate()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def url_of(env: dict[str, str]) -> str:
    return f"http://127.0.0.1:{env['HEADWATER_GATEWAY_PORT']}"


def log_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
