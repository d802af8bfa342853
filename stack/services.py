"""The stack's Python HTTP services (registry, gateway): how each starts, when it is ready, what it publishes."""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
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


def registry_service(cfg: StackConfig) -> HttpService:
    """The schema registry (`registry/`): stores schemas in the _schemas topic, ready once it has replayed it."""
    return HttpService(
        name="registry", module="registry", port=cfg.registry_port, ready_path="/ready",
        endpoints={"REGISTRY_URL": f"http://127.0.0.1:{cfg.registry_port}"},
        env={"REGISTRY_HOST": "127.0.0.1", "REGISTRY_PORT": str(cfg.registry_port)},
    )


def dev_write_key(cfg: StackConfig) -> str:
    """The stack's development write key, created once in <state>/gateway/dev-write-key (mode 0600).

    Only its SHA-256 reaches the gateway (HEADWATER_GATEWAY_WRITE_KEYS); the key itself goes to stack.env.
    """
    path = cfg.state_dir / "gateway" / "dev-write-key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("hw_" + secrets.token_urlsafe(32) + "\n")
        tmp.chmod(0o600)
        os.replace(tmp, path)
    return path.read_text().strip()


class _Lazy(Mapping[str, str]):
    """A mapping computed on first use, so that `down` and `status` (which never read a service's env or
    endpoints) do not create the development key as a side effect."""

    def __init__(self, make: Callable[[], dict[str, str]]) -> None:
        self._make = make
        self._value: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._value is None:
            self._value = self._make()
        return self._value

    def __getitem__(self, key: str) -> str:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def gateway_service(cfg: StackConfig) -> HttpService:
    """The ingestion gateway (`gateway/`): ready once its producer and schema cache are."""
    def env() -> dict[str, str]:
        digest = hashlib.sha256(dev_write_key(cfg).encode()).hexdigest()
        return {"HEADWATER_GATEWAY_HOST": "127.0.0.1", "HEADWATER_GATEWAY_PORT": str(cfg.gateway_port),
                "HEADWATER_GATEWAY_WRITE_KEYS": f"dev:{digest}",
                "HEADWATER_GATEWAY_WORKERS": os.environ.get("HEADWATER_GATEWAY_WORKERS", "2")}

    def endpoints() -> dict[str, str]:
        return {"GATEWAY_URL": f"http://127.0.0.1:{cfg.gateway_port}", "HEADWATER_WRITE_KEY": dev_write_key(cfg)}

    return HttpService(name="gateway", module="gateway", port=cfg.gateway_port, ready_path="/readyz",
                       endpoints=_Lazy(endpoints), env=_Lazy(env))


def console_service(cfg: StackConfig) -> HttpService:
    """The operator's console (`console/`): a read-only page on loopback, ready once it serves /healthz.

    Port: HEADWATER_CONSOLE_PORT, else 8090 next to the default gateway port, else (a stack on chosen ports,
    such as the tests') a free one, kept in <state>/console/port so that every later `up` finds it again.
    """
    port = int(os.environ.get("HEADWATER_CONSOLE_PORT") or (8090 if cfg.gateway_port == 8080 else _kept_port(cfg)))
    return HttpService(name="console", module="console", port=port, ready_path="/healthz",
                       endpoints={"CONSOLE_URL": f"http://127.0.0.1:{port}"},
                       env={"HEADWATER_CONSOLE_HOST": "127.0.0.1", "HEADWATER_CONSOLE_PORT": str(port),
                            "HEADWATER_PIPELINE_DIR": str(cfg.state_dir / "pipeline")})


def _kept_port(cfg: StackConfig) -> int:
    path = cfg.state_dir / "console" / "port"
    if path.exists():
        return int(path.read_text())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(port))
    return port


def services(cfg: StackConfig) -> list[HttpService]:
    """The services `up` starts after Kafka, in order (`down` stops them in reverse order)."""
    return [registry_service(cfg), gateway_service(cfg), console_service(cfg)]
