"""A real `python -m subscribe` process on a free port with three read keys, for the benchmark and the tests.

`start_server` returns once the server answers /readyz; `Server.stop` ends it (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from common.ports import free_port
from stack.config import REPO_ROOT
from subscribe.keys import hash_key, new_read_key

READY_TIMEOUT_S = 60.0


@dataclass
class Keys:
    """Read keys of the server: `all` (every stream), `rules` (rule.* only), `revoked`."""

    all: str = field(default_factory=new_read_key)
    rules: str = field(default_factory=new_read_key)
    revoked: str = field(default_factory=new_read_key)

    def config(self) -> str:
        """HEADWATER_SUBSCRIBE_READ_KEYS for these keys."""
        return (f"all:{hash_key(self.all)}:*,rules:{hash_key(self.rules)}:rule.*,"
                f"old:{hash_key(self.revoked)}:*:revoked")


@dataclass
class Server:
    """A running server: its URL, process, log file and keys."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    keys: Keys

    def metric(self, name: str, labels: str = "") -> float:
        """The sum of the samples of metric `name` (those whose labels start with `labels`, when given)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name + (("{" + labels) if labels else "")) and not line.startswith("#"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(stack_env: Mapping[str, str], tmp: Path, keys: Keys, *, port: int | None = None,
                 cwd: Path | None = None, **settings: str) -> Server:
    """`cwd`: where `python -m subscribe` finds the package (another revision's copy; default this checkout)."""
    port = port or free_port()
    env = {**os.environ, **stack_env, "PYTHONUNBUFFERED": "1", "HEADWATER_SUBSCRIBE_PORT": str(port),
           "HEADWATER_SUBSCRIBE_READ_KEYS": keys.config(), **settings}
    log = tmp / f"subscribe-{port}-{time.monotonic_ns()}.log"
    with log.open("wb") as out:
        if cwd is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(cwd), str(REPO_ROOT)])
        proc = subprocess.Popen([sys.executable, "-m", "subscribe"], env=env, cwd=cwd or REPO_ROOT, stdout=out,
                                stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", proc, log, keys)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"subscribe exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(server.url + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"subscribe not ready in {READY_TIMEOUT_S:g} s")
