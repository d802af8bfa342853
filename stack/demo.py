"""`make demo`: the whole flow on the local stack: SDK producers -> gateway -> Kafka -> Spark live aggregates, and a
streaming SQL rule applied while it runs (`demo_rules.py`)."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

import headwater

from common.envfile import read_env
from loadtest.events import EventFactory
from stack import demo_rules
from stack.config import REPO_ROOT, StackConfig


@dataclass
class Fleet:
    """Simulated producer nodes, each with its own SDK client, spool and producer id, and their totals."""

    env: dict[str, str]
    rate: float
    spool_root: Path
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("queued", "acknowledged", "rejected",
                                                                          "dropped"), 0))

    def run_node(self, node: int) -> None:
        """Send `rate` events per second until `stop`, then close the client (which flushes)."""
        node_id = f"node-{node:04d}"  # spark_pipeline/data/nodes.csv knows node-0001..node-0200
        factory = EventFactory(seed=node)
        client = headwater.Client(self.env["GATEWAY_URL"], self.env["HEADWATER_WRITE_KEY"],
                                  spool_dir=str(self.spool_root / node_id), node_id=node_id,
                                  context={"app": "demo", "env": "dev"}, linger_s=0.2)
        next_at = time.monotonic()
        while not self.stop.is_set():
            event = factory.event(client.producer_id, node_id, 0, int(time.time() * 1000))
            client.track(str(event["event_type"]), event["properties"])
            next_at += 1.0 / self.rate
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        client.close(30)
        m = client.metrics()
        with self.lock:
            self.totals["queued"] += m.enqueued
            self.totals["acknowledged"] += m.acknowledged
            self.totals["rejected"] += m.rejected
            self.totals["dropped"] += sum(m.dropped.values())


def _die_with_parent() -> None:
    """In the pipeline's child process: get SIGTERM if the demo dies (a crash must not orphan a Spark job)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class PipelineOutput:
    """Copies the pipeline's stderr to a log file and shows the console sink's tables on this terminal.

    Spark writes the console sink's tables among its own log lines; only the tables are worth a reader's eye.
    """

    TABLE_PREFIXES = (b"|", b"+", b"Batch: ", b"-------")

    def __init__(self, stream: IO[bytes], log_path: Path) -> None:
        self.started = threading.Event()
        self._thread = threading.Thread(target=self._copy, args=(stream, log_path), daemon=True)
        self._thread.start()

    def _copy(self, stream: IO[bytes], log_path: Path) -> None:
        with open(log_path, "ab") as log:
            for line in iter(stream.readline, b""):
                log.write(line)
                if line.startswith(self.TABLE_PREFIXES):
                    sys.stdout.write(line.decode(errors="replace"))
                    sys.stdout.flush()
                elif b"started query" in line and not self.started.is_set():
                    self.started.set()
                    print("pipeline queries started", flush=True)

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack.demo", description=__doc__)
    parser.add_argument("--nodes", type=int, default=20, help="simulated producer nodes (default 20)")
    parser.add_argument("--rate", type=float, default=5.0, help="events per second per node (default 5)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of producing (default 60)")
    parser.add_argument("--drain", type=float, default=30.0, help="seconds the pipeline runs after the producers")
    args = parser.parse_args(argv)
    cfg = StackConfig.from_env()
    env = read_env(cfg.env_file)
    outputs = cfg.state_dir / "pipeline"
    if "CONSOLE_URL" in env:
        print(f"console (live charts): {env['CONSOLE_URL']}/", flush=True)
    print(f"stack: Kafka {env['KAFKA_BOOTSTRAP']}, registry {env['REGISTRY_URL']}, gateway {env['GATEWAY_URL']}")
    print(f"starting the Spark pipeline (outputs under {outputs}); live aggregates print below as they update")
    # The console sink's tables go to stdout (this terminal); Spark's own logging goes to a file.
    log_path = cfg.logs_dir / "pipeline-demo.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"(Spark's log: {log_path})")
    pipeline = subprocess.Popen([sys.executable, "-m", "spark_pipeline", "--env-file", str(cfg.env_file), "run",
                                 "--console", "--output", str(outputs)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=demo_rules.pipeline_env(),
                                preexec_fn=_die_with_parent)  # noqa: PLW1509 - no thread runs yet
    output = PipelineOutput(cast(IO[bytes], pipeline.stdout), log_path)  # stdout=PIPE: never None
    fleet = Fleet(env, args.rate, cfg.state_dir / "demo-spool")
    stop, totals = fleet.stop, fleet.totals
    threads = [threading.Thread(target=fleet.run_node, args=(n,), name=f"node-{n}") for n in range(1, args.nodes + 1)]
    try:
        # Spark takes 20-40 s to start on 2 cores; producing starts once the queries run.
        if not output.started.wait(180) and pipeline.poll() is not None:
            raise SystemExit(f"the pipeline exited ({pipeline.returncode}); see {log_path}")
        rule = demo_rules.RuleApply(cfg.env_file)
        rule.start()
        print(f"{args.nodes} producer nodes send {args.rate:g} events/s each for {args.duration:g}s through the SDK")
        for t in threads:
            t.start()
        stop.wait(args.duration)
        stop.set()
        for t in threads:
            t.join()
        print(f"producers done: {totals['queued']} tracked, {totals['acknowledged']} acknowledged by the gateway, "
              f"{totals['rejected']} rejected, {totals['dropped']} dropped")
        print(f"the pipeline keeps running for {args.drain:g}s so the last windows update")
        with contextlib.suppress(subprocess.TimeoutExpired):
            pipeline.wait(args.drain)
        if rule.done.wait(300) and rule.ok.is_set() and pipeline.poll() is None:
            demo_rules.show_output(env)
    except KeyboardInterrupt:
        stop.set()
    finally:
        if pipeline.poll() is None:
            pipeline.send_signal(signal.SIGINT)
            try:
                pipeline.wait(60)
            except subprocess.TimeoutExpired:
                pipeline.kill()
        output.join(10)
    print("outputs:")
    for name in sorted(p.name for p in outputs.iterdir() if p.is_dir()) if outputs.exists() else []:
        print(f"  {outputs / name}")
    print(f"  Kafka topic {env['AGGREGATES_TOPIC']} (Avro, subject in the registry), dead letters in "
          f"{env['DEADLETTER_TOPIC']}")
    print("recompute everything from the log: .venv/bin/python -m spark_pipeline replay --output /tmp/replay")
    print("dead letters: .venv/bin/python -m deadletter summary (docs/operations.md)")
    print("stop the stack with `make down`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
