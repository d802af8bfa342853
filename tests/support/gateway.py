"""Starting a real `python -m gateway` process for a test: its environment, its start, its wait until it serves."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
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


def start_gateway(env: dict[str, str], out: IO[bytes] | int | None = None, *args: str) -> subprocess.Popen[bytes]:
    """`python -m gateway [args]` from the repository root; output to `out` (a file, PIPE, or inherited)."""
    return subprocess.Popen([sys.executable, "-m", "gateway", *args], env=env, cwd=REPO_ROOT, stdout=out,
                            stderr=subprocess.STDOUT if out is not None else None)


def wait_live(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    """Wait until the gateway answers /livez; fail at once if the process exits."""
    def alive() -> None:
        if proc.poll() is not None:
            raise AssertionError(f"the gateway exited ({proc.returncode}) before serving")

    def live() -> bool:
        try:
            with urllib.request.urlopen(url + "/livez", timeout=2):
                return True
        except OSError:
            return False

    wait_for(f"{url}/livez", live, timeout_s, interval_s=0.3, alive=alive)


def url_of(env: dict[str, str]) -> str:
    return f"http://127.0.0.1:{env['HEADWATER_GATEWAY_PORT']}"


def log_text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
