"""Rules benchmark (not a test): what `make bench-rules` prints, in one run.

    python -m bench.rules [--rate 1000] [--seconds 20] [--warmup 20] [--drain 10] [--many 20] [--many-seconds S]
        [--settle 60]
        [--cost-events 30000] [--cost-rules 0,1,5,20,50] [--live-mode realtime] [--realtime-batch "5 minutes"]
        [--rules-realtime-batch "10 seconds"]
        [--skip-latency] [--skip-cost] [--env-file PATH]

Against the running stack (`make up`; endpoints from `.headwater/stack.env`), with the pipeline (`job.run`: the
built-in live queries, the shared enriched stream and the rule manager) in this process:

1. latency (`latency.py`): events posted through the gateway at `--rate` events/s; `rules apply` (the command, a
   process with its own JVM, as an operator runs it; one untimed refused apply first records its JDK class
   archive) -> the rule's first output record, for the first rule and the next three; created_at -> output
   record p50/p99 per rule kind (filter, routing, projection, 10 s windowed count) with one rule running (20 s
   windows), then with `--many` rules (as many of each kind) running, over one built-in real-time batch (5
   minutes: the built-in queries pause a moment at each batch end, and a window that long holds one at its true
   weight; its worst 20 s slice is printed beside); the built-in 10-second aggregate's latency in both.
2. cost (`cost.py`): pipeline throughput with each count of `--cost-rules` running, and its ratio to none.

Prints the figures with the host's load average, then one JSON line (`python -m bench.report --add` renders a
dated page in docs/benchmarks/). The rules it applies are deleted at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from bench.rules import cost, latency
from bench.rules.common import Running, drop_topics, log, new_topic, warm_cli
from bench.spark.generate import Encoder, register_catalog
from common.envfile import read_env, stack_env_file
from spark_pipeline.config import PipelineConfig, duration_ms
from spark_pipeline.rules.model import OUTPUT_TOPIC_PREFIX
from spark_pipeline.rules.store import RuleStore
from spark_pipeline.session import build_session

RULE_PREFIX = "bench_"  # every rule the bench applies (latency.py, cost.py)
# the topics a run makes (its events, enriched and aggregates topics; its rules' outputs), deleted at its end
BENCH_TOPICS = ("bench.rules.", f"{OUTPUT_TOPIC_PREFIX}{RULE_PREFIX}")
GOALS_MS = {"filter": 1000, "routing": 1000, "projection": 1000, "aggregation": 2000, "builtin_10s_aggregate": 1000}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def print_latency(result: dict[str, Any]) -> None:
    a = result["apply"]
    print(f"rules apply (the command's own process): {a['apply_s']} s; first output record {a['to_first_output_s']} s "
          f"after the command began (goal <= 5 s); status running after {a['to_running_status_s']} s")
    if a.get("next_rules_to_first_output_s"):
        print(f"  the next rules (each applied after the previous was deleted): first output after "
              f"{', '.join(f'{x} s' for x in a['next_rules_to_first_output_s'])}")
    print(f"created_at -> output record at {result['rate']} events/s, {result['seconds']:.0f} s windows at 1 rule, "
          f"{result['many_seconds']:.0f} s at {result['many_rules']['rules']} (p50 / p99 / missing of events "
          f"expected; goal p99; the worst 20 s slice of a longer window):")
    rows = [("1 rule", result["one_rule"]), (f"{result['many_rules']['rules']} rules", result["many_rules"])]
    for label, figures in rows:
        for kind in (*latency.KINDS, "builtin_10s_aggregate"):
            f = figures.get(kind)
            if f is None and kind == "builtin_10s_aggregate" and label == "1 rule":
                f = result["builtin_at_one_rule"]
            if f is None:
                continue
            worst = f.get("worst_slice")
            slice_text = (f"; worst {worst['seconds']:.0f} s slice p99 {_ms(worst['p99_ms'])} ms at "
                          f"+{worst['starts_at_s']:.0f} s") if worst else ""
            print(f"  {label:>9} {kind:<22} p50 {_ms(f['p50_ms']):>7} ms  p99 {_ms(f['p99_ms']):>7} ms  "
                  f"missing {f['missing']}/{f['events']}  (goal p99 <= {GOALS_MS[kind]:,} ms{slice_text})")
    print(f"  tiers of the {result['many_rules']['rules']} rules: {', '.join(result['tiers'])}")
    ended = [label for label, f in rows if f.get("builtin_batch_ended_in_window")]
    ended += [f"1 rule ({kind})" for kind, w in result.get("one_rule_windows", {}).items()
              if w.get("builtin_batch_ended_in_window")]
    print("  a built-in real-time batch ended inside: " + (", ".join(ended) or "no window")
          + " (the built-in queries pause a moment at each batch end; the rules read what `enriched` writes)")


def print_cost(rows: list[dict[str, Any]]) -> None:
    print("pipeline throughput (events/s until every output has them; ratio to 0 rules, goal >= 0.5 at 20):")
    for r in rows:
        print(f"  {r['rules']:>3} rules: {r['events_per_s'] or '-':>7} events/s  x{r['vs_none'] or '-':<6} "
              f"({r['seconds']} s for {r['events']} events; counted {r['counted']}; tiers {r['tiers']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rules", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0, help="each measured window")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--drain", type=float, default=10.0, help="seconds after a window for its last outputs")
    parser.add_argument("--many", type=int, default=20)
    parser.add_argument("--many-seconds", type=float, default=None,
                        help="the --many rules' window (default: one built-in real-time batch, --realtime-batch, so "
                             "it holds one batch end of each built-in query at its true weight; --seconds in "
                             "micro-batch mode); its worst 20 s slice is printed too")
    parser.add_argument("--settle", type=float, default=60.0,
                        help="seconds between the last of the --many rules' first outputs and their window")
    parser.add_argument("--cost-events", type=int, default=30_000)
    parser.add_argument("--cost-rules", default="0,1,5,20,50")
    parser.add_argument("--live-mode", default="realtime", choices=("realtime", "microbatch"))
    parser.add_argument("--realtime-batch", default="5 minutes", help="the built-in real-time queries' batch")
    parser.add_argument("--rules-realtime-batch", default="10 seconds", help="the rules' packed queries' batch")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--env-file", type=Path, default=stack_env_file())
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.many_seconds is None:
        args.many_seconds = (duration_ms(args.realtime_batch) / 1000 if args.live_mode == "realtime"
                             else args.seconds)
    env = {**read_env(args.env_file), **os.environ}
    base = PipelineConfig.from_env(env)
    os.environ["HEADWATER_RULE_STATUS_S"] = "1"
    os.environ["HEADWATER_RULE_STARTING_OFFSETS"] = "latest"
    spark = build_session("headwater-bench-rules")
    store = RuleStore(base.bootstrap)
    # A run stopped before its end (Ctrl-C, a timeout) leaves its rules in the stack's rules topic, where every
    # later pipeline would start them: the bench's own names (`bench_`) are removed first.
    if leftovers := sorted(n for n in store.latest_rules() if n.startswith(RULE_PREFIX)):
        for name in leftovers:
            store.delete(name)
        log.warning("removed %d rules a stopped bench run left: %s", len(leftovers), ", ".join(leftovers[:5]))
    load_before = os.getloadavg()
    out: dict[str, Any] = {"bench": "rules", "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
                           "live_mode": args.live_mode, "realtime_batch": args.realtime_batch,
                           "rules_realtime_batch": args.rules_realtime_batch, "settle_s": args.settle,
                           "master": spark.sparkContext.master}

    def config(events_topic: str) -> PipelineConfig:
        return base.with_overrides(
            events_topic=events_topic, output_dir=tempfile.mkdtemp(prefix="bench-rules-"), starting_offsets="latest",
            registry_poll_s=3600, aggregates_topic=new_topic(base.bootstrap, "bench.rules.aggregates"),
            enriched_topic=new_topic(base.bootstrap, "bench.rules.enriched", 1), live_mode=args.live_mode,
            realtime_batch=args.realtime_batch, rules_realtime_batch=args.rules_realtime_batch,
            lateness="2 minutes", metrics_port=0, rules_realtime=True)

    try:
        if not args.skip_latency:
            out["cli_warm_s"] = round(warm_cli(env, Path(tempfile.mkdtemp(prefix="bench-rules-"))), 2)
            pipeline = Running(spark, config(base.events_topic))
            try:
                out["latency"] = latency.run(pipeline, env, store, rate=args.rate, seconds=args.seconds,
                                             warmup=args.warmup, drain=args.drain, many=args.many,
                                             settle=args.settle, many_seconds=args.many_seconds)
            finally:
                pipeline.stop()
            print_latency(out["latency"])
        if not args.skip_cost:
            encoder = Encoder(register_catalog(base.registry_url))
            pipeline = Running(spark, config(new_topic(base.bootstrap, "bench.rules.events")))
            try:
                out["cost"] = cost.run(pipeline, store, encoder, [int(x) for x in args.cost_rules.split(",") if x],
                                       args.cost_events)
            finally:
                pipeline.stop()
            print_cost(out["cost"])
    finally:
        spark.stop()
        store.close()
        dropped = drop_topics(base.bootstrap, BENCH_TOPICS)
        log.info("deleted the run's %d topics (%s, ...)", len(dropped), ", ".join(dropped[:3]))
    load_after = os.getloadavg()
    out["load_average"] = {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in load_after],
                           "cores": os.cpu_count()}
    print(f"load average (1/5/15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}, {os.cpu_count()} cores")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
