"""One driver process: start it, send JSON-line commands, read replies with a timeout, SIGKILL it (DRIVER.md)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

REPLY_TIMEOUT_S = 60.0
_SCRUBBED_PREFIXES = ("HEADWATER_",)
_SCRUBBED = {"GATEWAY_URL", "REGISTRY_URL"}


class DriverError(Exception):
    """The driver broke the protocol: no reply in time, a line that is not JSON, or it exited."""


def driver_env() -> dict[str, str]:
    """The environment of a driver: ours without any Headwater setting (DRIVER.md "Process")."""
    return {k: v for k, v in os.environ.items() if k not in _SCRUBBED and not k.startswith(_SCRUBBED_PREFIXES)}


class DriverProcess:
    """A running driver; `call` sends one command and returns its reply (a dict with `ok`)."""

    def __init__(self, argv: list[str], cwd: Path, stderr_path: Path) -> None:
        self._stderr = stderr_path.open("ab")
        self.proc = subprocess.Popen(argv, cwd=cwd, env=driver_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()
        self.log: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def call(self, cmd: dict[str, Any], timeout_s: float = REPLY_TIMEOUT_S) -> dict[str, Any]:
        """Send `cmd`, return the reply; raise `DriverError` if none comes within `timeout_s`."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(cmd).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise DriverError(f"driver exited (status {self.proc.poll()}) before {cmd['cmd']}: {exc}") from None
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            raise DriverError(f"no reply to {cmd['cmd']} within {timeout_s:g} s") from None
        if line is None:
            raise DriverError(f"driver exited (status {self.proc.wait()}) without replying to {cmd['cmd']}")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise DriverError(f"reply to {cmd['cmd']} is not JSON: {line[:200]!r}") from None
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise DriverError(f"reply to {cmd['cmd']} has no boolean 'ok': {line[:200]!r}")
        self.log.append((cmd, reply))
        return reply

    def kill(self) -> None:
        """SIGKILL (a crash) and reap."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close_pipes()

    def stop(self, timeout_s: float = 20.0) -> None:
        """Close stdin (the driver exits at EOF); SIGKILL if it has not exited within `timeout_s`."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=timeout_s)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()
