"""The stack's Python HTTP services (registry, gateway): how each starts, when it is ready, what it publishes."""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field

from stack.config import REPO_ROOT, StackConfig
from stack.process import ManagedProcess


class ServiceError(RuntimeError):
    """A service did not start or become ready; the message names its log file."""


@dataclass(frozen=True)
class HttpService:
    """A `python -m <module>` process listening on 127.0.0.1:<port>, ready when GET <ready_path> answers 200.

    `env` is added to the process's environment (on top of the stack's endpoints so far); `endpoints` are
    the KEY=VALUE lines it adds to stack.env once ready.
    """

    name: str
    module: str
    port: int
    ready_path: str
    endpoints: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()

    def process(self, cfg: StackConfig) -> ManagedProcess:
        return ManagedProcess(self.name, cfg.run_dir / f"{self.name}.pid", f"-m {self.module}")

    def start(self, cfg: StackConfig, stack_env: Mapping[str, str]) -> bool:
        """Start unless running; wait until ready. True if started now."""
        proc = self.process(cfg)
        started = False
        if proc.pid() is None:
            env = {**_base_env(), **stack_env, **self.env}
            proc.start([sys.executable, "-m", self.module, *self.args], cfg.logs_dir / f"{self.name}.log",
                       env=env, cwd=REPO_ROOT)
            started = True
        self.wait_ready(cfg, proc)
        return started

    def wait_ready(self, cfg: StackConfig, proc: ManagedProcess) -> None:
        url = f"http://127.0.0.1:{self.port}{self.ready_path}"
        deadline = time.monotonic() + cfg.start_timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if proc.pid() is None:
                raise ServiceError(f"{self.name} exited during start-up; see {cfg.logs_dir / (self.name + '.log')}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(exc)
            time.sleep(0.2)
        proc.stop(10)
        raise ServiceError(f"{self.name} not ready at {url} after {cfg.start_timeout_s}s ({last}); "
                           f"see {cfg.logs_dir / (self.name + '.log')}")


def _base_env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def services(cfg: StackConfig) -> list[HttpService]:
    """The services `up` starts after Kafka, in order (`down` stops them in reverse order)."""
    return []
