"""`make demo`: the whole flow on the local stack: SDK producers -> gateway -> Kafka -> Spark live aggregates, and a
streaming SQL rule applied while it runs (`rules.py`)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, cast

from common.envfile import read_env
from console.pipeline_files import checkpoint_offsets
from demo import rules as demo_rules
from demo.fleet import Fleet
from demo.pipeline import PipelineExited, PipelineOutput, die_with_parent, stop, wait_caught_up
from demo.summary import counted, describe
from demo.topic import end_offsets, latest_rows
from spark_pipeline.job import QUERY_GROUPS
from stack.config import REPO_ROOT, StackConfig


def start_pipeline(cfg: StackConfig, outputs: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], PipelineOutput]:
    """`python -m spark_pipeline run --console`, its tables on this terminal, its log in `log_path`."""
    pipeline = subprocess.Popen([sys.executable, "-m", "spark_pipeline", "--env-file", str(cfg.env_file), "run",
                                 "--console", "--output", str(outputs)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=demo_rules.pipeline_env(),
                                preexec_fn=die_with_parent)  # noqa: PLW1509 - no thread runs yet
    return pipeline, PipelineOutput(cast(IO[bytes], pipeline.stdout), log_path)  # stdout=PIPE: never None


def produce(fleet: Fleet, nodes: int, duration_s: float, output: PipelineOutput, say: Callable[[str], None]) -> None:
    """Every node sends until the pipeline has shown a live table of what they send, then for `duration_s` more,
    then flushes: the tables update while events arrive, however long Spark's first batch takes."""
    threads = [threading.Thread(target=fleet.run_node, args=(n,), name=f"node-{n}") for n in range(1, nodes + 1)]
    for t in threads:
        t.start()
    try:
        output.wait_table(output.tables + 1, say)
        say(f"the live aggregates update below; the producers go on for {duration_s:g}s")
        fleet.stop.wait(duration_s)
    finally:
        fleet.stop.set()
        for t in threads:
            t.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--nodes", type=int, default=20, help="simulated producer nodes (default 20)")
    parser.add_argument("--rate", type=float, default=5.0, help="events per second per node (default 5)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of producing (default 60)")
    parser.add_argument("--drain", type=float, default=5.0,
                        help="seconds the pipeline runs after it has read every event (default 5)")
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
    print(f"(Spark's log: {log_path})", flush=True)
    pipeline, output = start_pipeline(cfg, outputs, log_path)

    def say(line: str) -> None:
        print(line, flush=True)

    fleet = Fleet(env, args.rate, cfg.state_dir / "demo-spool")
    rule = demo_rules.RuleApply(cfg.env_file)
    try:
        # Nothing is sent before every query runs: the live tables then show the events as they arrive.
        waited = output.wait_running(QUERY_GROUPS["all"], say)
        print(f"pipeline queries running (after {waited:.0f} s)", flush=True)
        rule.start()
        since = dt.datetime.now(dt.UTC)
        print(f"{args.nodes} producer nodes send {args.rate:g} events/s each for {args.duration:g}s through the SDK",
              flush=True)
        produce(fleet, args.nodes, args.duration, output, say)
        totals = fleet.totals
        print(f"producers done: {totals['queued']} tracked, {totals['acknowledged']} acknowledged by the gateway, "
              f"{totals['rejected']} rejected, {totals['dropped']} dropped", flush=True)
        end = end_offsets(env, env["EVENTS_TOPIC"])
        waited = wait_caught_up(lambda: checkpoint_offsets(outputs, env["EVENTS_TOPIC"], committed=True), end,
                                lambda: pipeline.poll() is None, say)
        print(f"the live query has read every event ({waited:.0f} s after the producers stopped); the pipeline "
              f"runs {args.drain:g}s more", flush=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            pipeline.wait(args.drain)
        for line in describe(counted(latest_rows(env, env["AGGREGATES_TOPIC"]).values(), since),
                             totals["acknowledged"], since):
            print(line)
        if rule.wait(say) and pipeline.poll() is None:
            demo_rules.show_output(env)
    except PipelineExited as exc:
        print(f"{exc} ({pipeline.wait()}); see {log_path}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        fleet.stop.set()
    finally:
        rule.stop()
        stop(pipeline)
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
