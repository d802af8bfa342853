"""`make demo`: the whole flow on the local stack: SDK producers -> gateway -> Kafka -> Spark live aggregates, and a
streaming SQL rule applied while it runs (`rules.py`)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import subprocess
import sys
import threading
from typing import IO, cast

from common.envfile import read_env
from demo import rules as demo_rules
from demo.fleet import Fleet
from demo.pipeline import PipelineOutput, die_with_parent
from stack.config import REPO_ROOT, StackConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
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
                                preexec_fn=die_with_parent)  # noqa: PLW1509 - no thread runs yet
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
