"""Background service processes: start detached with a pid file, find them again, stop them and their children."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path


class StartWatch:
    """A start-up deadline that moves while the process shows progress (its log files grow): a slow, busy host gets
    the time it needs; a start that hangs fails after `quiet_s` without a new log line."""

    def __init__(self, quiet_s: float, logs: Sequence[Path], clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet_s = quiet_s
        self._logs = list(logs)
        self._clock = clock
        self._size = self._bytes()
        self._deadline = clock() + quiet_s

    def _bytes(self) -> int:
        total = 0
        for path in self._logs:
            files = path.rglob("*") if path.is_dir() else [path]
            for f in files:
                with contextlib.suppress(OSError):
                    total += f.stat().st_size
        return total

    def expired(self) -> bool:
        """True once `quiet_s` passed without the logs growing."""
        now, size = self._clock(), self._bytes()
        if size != self._size:
            self._size, self._deadline = size, now + self.quiet_s
        return now > self._deadline


def cpu_ticks(pid: int) -> int:
    """CPU time (clock ticks, user + system) `pid` has used so far; 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return int(fields[11]) + int(fields[12])


def run_while_busy(cmd: Sequence[str], quiet_s: float) -> subprocess.CompletedProcess[str]:
    """Run `cmd` to its end however long it takes while it keeps using CPU (a JVM tool on a loaded host); kill it
    after `quiet_s` without a tick of CPU time (hung). Output captured; TimeoutError when killed."""
    with subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        result: dict[str, str] = {}

        def drain() -> None:
            result["out"], result["err"] = proc.communicate()

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        ticks, deadline = -1, time.monotonic() + quiet_s
        while reader.is_alive():
            now, used = time.monotonic(), cpu_ticks(proc.pid)
            if used != ticks:
                ticks, deadline = used, now + quiet_s
            elif now > deadline:
                proc.kill()
                reader.join()
                raise TimeoutError(f"{cmd[0]} used no CPU for {quiet_s:.0f}s: killed")
            reader.join(0.2)
    return subprocess.CompletedProcess(list(cmd), proc.returncode, result.get("out", ""), result.get("err", ""))


class ManagedProcess:
    """A service started by the launcher: its pid file and a marker that must be in its command line.

    The marker (for example the service's data directory) guards against signalling an unrelated process
    that reused a stale pid.
    """

    def __init__(self, name: str, pid_file: Path, marker: str) -> None:
        self.name = name
        self.pid_file = pid_file
        self.marker = marker
        # Set when this process started it: between fork and exec the child's cmdline is still ours.
        self._popen: subprocess.Popen[bytes] | None = None

    def pid(self) -> int | None:
        """The running process's pid, or None when it is not running (a stale pid file is removed)."""
        if self._popen is not None:
            if self._popen.poll() is None:
                return self._popen.pid
            self._popen = None
            self.pid_file.unlink(missing_ok=True)
            return None
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if self.marker not in _cmdline(pid) or _is_zombie(pid):
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def start(self, cmd: Sequence[str], log_file: Path, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> int:
        """Start `cmd` in its own session (so it outlives the CLI and is stopped as a group)."""
        if self.marker not in " ".join(cmd):
            raise ValueError(f"{self.name}: marker {self.marker!r} must appear in the command line")
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(
                list(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=dict(env) if env is not None else None, cwd=cwd,
            )
        self.pid_file.write_text(f"{proc.pid}\n")
        self._popen = proc
        return proc.pid

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM the process group, wait up to `timeout_s`, then SIGKILL. True if something was stopped."""
        group = self._recorded_pid()
        pid = self.pid()
        if pid is None:
            return self._kill_leftovers(group)
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                break
            time.sleep(0.1)
        else:
            _signal_group(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        # Children that ignored the group signal (none expected) are killed too.
        _signal_group(pid, signal.SIGKILL)
        self._reap()
        self.pid_file.unlink(missing_ok=True)
        return True

    def _reap(self) -> None:
        """Wait for our own child to be reaped: a JVM's main thread shows as a zombie while its other threads still
        exit, and until they have, `pid()` (Popen.poll) would still name it (seen right after kill -9 of a broker)."""
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(30)
            self._popen = None

    def _recorded_pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _kill_leftovers(self, group: int | None) -> bool:
        """SIGKILL what is left of a group whose leader died (a crashed supervisor's workers, say).

        Only members whose command line carries the marker: a stale pid file must never hit another program.
        """
        if group is None:
            return False
        members = [pid for pid in _group_members(group) if self.marker in _cmdline(pid)]
        for pid in members:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in members) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.pid_file.unlink(missing_ok=True)
        return bool(members)

    def kill(self) -> None:
        """SIGKILL the process group at once (fault injection: no clean shutdown)."""
        pid = self.pid()
        if pid is not None:
            _signal_group(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
            self._reap()
            self.pid_file.unlink(missing_ok=True)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _group_members(group: int) -> list[int]:
    """Live processes whose process group id is `group`."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(group) and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _alive(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass  # not our child: the CLI that started it has exited
    return Path(f"/proc/{pid}").exists() and not _is_zombie(pid)
