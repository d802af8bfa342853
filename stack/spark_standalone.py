"""A Spark standalone cluster on loopback (one master, one worker) started from the installed pyspark (dev-only).

    python -m stack.spark_standalone up|down|status|url [--state-dir DIR] [--cores N] [--memory 1g]

The master and the worker are `spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker` from
pyspark's own `bin/`, each in its own process group (the worker's executors are its children, so killing the
group is losing the machine). Ports are free loopback ports unless given; they, the pid files, the logs and the
worker's work dir (where executors fetch `--py-files`/`--files` and write their stdout/stderr) live under
`<state>/spark/`. docs/spark-pipeline.md ("Running on a Spark standalone cluster") shows how to submit to it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from common.ports import free_port
from stack.process import ManagedProcess

DAEMON_MEMORY = "256m"  # the master's and the worker's own heaps (executors get `worker_memory`)
PORTS_FILE = "ports.json"


class SparkClusterError(RuntimeError):
    """The master or the worker did not start or register in time; the message names the log file."""


def spark_class() -> Path:
    """pyspark's `spark-class` launcher (the PyPI wheel ships Spark's `bin/` and every jar)."""
    return Path(pyspark.__path__[0]) / "bin" / "spark-class"



class SparkStandalone:
    """One Spark standalone master and one worker on 127.0.0.1, state under `state_dir / "spark"`.

    Ports default to free ones, chosen at the first start and kept in `<state>/spark/ports.json` so that
    another process (the CLI's `status`/`down`) finds the same cluster. A worker started again after
    `kill_worker` takes a new port: the master may not have forgotten the dead one's address yet.
    """

    def __init__(self, state_dir: Path, *, worker_cores: int = 1, worker_memory: str = "1g",
                 master_port: int | None = None, master_ui_port: int | None = None,
                 start_timeout_s: float = 300.0) -> None:
        self.dir = Path(state_dir).resolve() / "spark"
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.start_timeout_s = start_timeout_s
        saved = self._saved_ports()
        self.master_port = master_port or saved.get("master") or free_port()
        self.master_ui_port = master_ui_port or saved.get("master_ui") or free_port()
        self.worker_port = saved.get("worker", 0)
        self.master = ManagedProcess("spark-master", self.dir / "run" / "master.pid", str(self._conf("master")))
        self.worker = ManagedProcess("spark-worker", self.dir / "run" / "worker.pid", str(self._conf("worker")))

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_ui_url(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    @property
    def work_dir(self) -> Path:
        """The worker's work dir: one folder per application, one per executor in it (files, stdout, stderr)."""
        return self.dir / "work"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    def start(self) -> None:
        """Start the master and the worker unless running; return once the master lists the worker ALIVE."""
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.master.pid() is None:
            self._write_conf("master", {"spark.master.rest.enabled": "false",
                                        "spark.deploy.recoveryMode": "NONE",
                                        # A worker that stops heart-beating (hung, not dead) is dropped in 20 s.
                                        "spark.worker.timeout": "20"})
            self.master.start([str(spark_class()), "org.apache.spark.deploy.master.Master",
                               "--host", "127.0.0.1", "--port", str(self.master_port),
                               "--webui-port", str(self.master_ui_port),
                               "--properties-file", str(self._conf("master"))],
                              self.logs_dir / "master.log", env=self._env(), cwd=self.dir)
            self._save_ports()
        self._wait("master", self.master, lambda state: True)
        if self.worker.pid() is None:
            self.start_worker()
        else:
            self._wait_worker()

    def start_worker(self) -> None:
        """Start a worker (on a new free port) and wait until the master lists it ALIVE."""
        if self.worker.pid() is not None:
            raise SparkClusterError(f"a worker already runs (pid {self.worker.pid()})")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.worker_port = free_port()
        self._write_conf("worker", {"spark.worker.cleanup.enabled": "false"})
        self.worker.start([str(spark_class()), "org.apache.spark.deploy.worker.Worker", self.master_url,
                           "--host", "127.0.0.1", "--port", str(self.worker_port), "--webui-port", str(free_port()),
                           "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                           "--work-dir", str(self.work_dir), "--properties-file", str(self._conf("worker"))],
                          self.logs_dir / "worker.log", env=self._env(), cwd=self.dir)
        self._save_ports()
        self._wait_worker()

    def kill_worker(self) -> int:
        """kill -9 the worker and its executors (its whole process group: the machine is lost); return its pid."""
        pid = self.worker.pid()
        if pid is None:
            raise SparkClusterError("no worker is running")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        _wait_gone(self.worker, pid)
        return pid

    def stop(self) -> None:
        """Stop the worker (and its executors), then the master; no process is left behind."""
        for proc in (self.worker, self.master):
            pid = proc.pid()
            proc.stop(20)
            if pid is not None:
                _wait_gone(proc, pid)

    def running(self) -> dict[str, bool]:
        return {"spark-master": self.master.pid() is not None, "spark-worker": self.worker.pid() is not None}

    def state(self) -> dict[str, Any]:
        """The master's JSON view (workers, applications), as its web UI serves it at /json."""
        with urllib.request.urlopen(f"{self.master_ui_url}/json", timeout=5) as resp:
            data: dict[str, Any] = json.load(resp)
            return data

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def _wait_worker(self) -> None:
        port = self.worker_port
        self._wait("worker", self.worker,
                   lambda state: any(w.get("state") == "ALIVE" and w.get("port") == port
                                     for w in state.get("workers", [])))

    def _wait(self, name: str, proc: ManagedProcess, ready: Any) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if proc.pid() is None:
                raise SparkClusterError(f"spark {name} exited during start-up; see {self.logs_dir / (name + '.log')}")
            try:
                if ready(self.state()):
                    return
                last = "not registered yet"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = str(exc)
            time.sleep(0.3)
        raise SparkClusterError(f"spark {name} not ready after {self.start_timeout_s:.0f}s ({last}); "
                                f"see {self.logs_dir / (name + '.log')}")

    def _env(self) -> dict[str, str]:
        # No PYTHONPATH: executors' Python must find the pipeline in what spark-submit ships, not in a checkout.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "SPARK_", "PYSPARK_"))}
        (self.dir / "conf").mkdir(parents=True, exist_ok=True)
        return {**env, "SPARK_HOME": str(Path(pyspark.__path__[0])), "SPARK_CONF_DIR": str(self.dir / "conf"),
                "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(self.dir / "local"),
                "SPARK_DAEMON_MEMORY": DAEMON_MEMORY}

    def _conf(self, name: str) -> Path:
        return self.dir / "conf" / f"{name}.properties"

    def _write_conf(self, name: str, props: dict[str, str]) -> None:
        self._conf(name).parent.mkdir(parents=True, exist_ok=True)
        self._conf(name).write_text("".join(f"{k} {v}\n" for k, v in props.items()))

    def _saved_ports(self) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in json.loads((self.dir / PORTS_FILE).read_text()).items()}
        except (OSError, ValueError, AttributeError):
            return {}

    def _save_ports(self) -> None:
        ports = {"master": self.master_port, "master_ui": self.master_ui_port, "worker": self.worker_port}
        (self.dir / PORTS_FILE).write_text(json.dumps(ports) + "\n")


def _wait_gone(proc: ManagedProcess, group: int, timeout_s: float = 30.0) -> None:
    """Wait until `proc` is reaped and no process of its group runs (a JVM's threads outlive its exit briefly)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (proc.pid() is not None or _group_alive(group)):
        time.sleep(0.05)


def _group_alive(group: int) -> bool:
    """Whether a process of group `group` (the worker's executors, say) still runs (zombies aside)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[2] == str(group) and fields[0] != "Z":
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack.spark_standalone", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("up", "down", "status", "url"),
                        help="start (waits for the worker), stop, say what runs, print the master URL")
    parser.add_argument("--state-dir", type=Path,
                        default=Path(os.environ.get("HEADWATER_STATE_DIR") or ".headwater"),
                        help="state folder (default $HEADWATER_STATE_DIR, else .headwater); Spark's is <state>/spark")
    parser.add_argument("--cores", type=int, default=1, help="cores the worker offers executors (default 1)")
    parser.add_argument("--memory", default="1g", help="memory the worker offers executors (default 1g)")
    args = parser.parse_args(argv)
    cluster = SparkStandalone(args.state_dir, worker_cores=args.cores, worker_memory=args.memory)
    if args.command == "up":
        try:
            cluster.start()
        except SparkClusterError as exc:
            print(f"spark: {exc}", file=sys.stderr)
            return 1
        print(f"spark master {cluster.master_url} (web UI {cluster.master_ui_url}), worker: "
              f"{args.cores} core(s), {args.memory}; logs in {cluster.logs_dir}")
    elif args.command == "down":
        was = cluster.running()
        cluster.stop()
        print(f"stopped: {', '.join(n for n, up in was.items() if up) or 'nothing was running'}")
    elif args.command == "url":
        if not cluster.running()["spark-master"]:
            print("spark: no master runs: `python -m stack.spark_standalone up` first", file=sys.stderr)
            return 1
        print(cluster.master_url)
    else:
        for name, up in cluster.running().items():
            print(f"{name}: {'running' if up else 'stopped'}")
        if cluster.running()["spark-master"]:
            print(f"master: {cluster.master_url} (web UI {cluster.master_ui_url})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
