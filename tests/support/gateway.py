"""Starting a real `python -m gateway` for a test: its environment, its start, its wait until it serves."""

from __future__ import annotations

import os
import subprocess
from typing import IO

from tests.support.keys import WRITE_KEY, gateway_keys
from tests.support.ports import free_port
from tests.support.processes import start_service, wait_serving


def gateway_env(bootstrap: str, registry_url: str, port: int | None = None, key: str = WRITE_KEY,
                **settings: str) -> dict[str, str]:
    """The process environment of a gateway on `port` (a free one by default) accepting `key` as source dev."""
    return {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
            "HEADWATER_GATEWAY_PORT": str(port or free_port()), **gateway_keys(key), **settings}


def start_gateway(env: dict[str, str], out: IO[bytes] | int | None = None, *args: str) -> subprocess.Popen[bytes]:
    """`python -m gateway [args]` from the repository root; output to `out` (a file, PIPE, or inherited)."""
    return start_service("gateway", env, out, *args)


def wait_live(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    """Wait until the gateway answers /livez; fail at once if the process exits."""
    wait_serving(url + "/livez", proc, timeout_s)


def url_of(env: dict[str, str]) -> str:
    return f"http://127.0.0.1:{env['HEADWATER_GATEWAY_PORT']}"


