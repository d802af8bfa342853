"""Command line: `python -m spark_pipeline run|replay|audit|rules`, or `headwater-pipeline` (settings: stack.env,
then the environment); `spark-submit` runs the same through `spark_pipeline/submit.py`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from pyspark.sql import functions as F

from common.envfile import read_env, stack_env_file
from spark_pipeline.config import ConfigError, PipelineConfig, join, storage_root
from spark_pipeline.rules import cli as rules_cli
from spark_pipeline.session import build_session

QUERY_GROUPS = ("all", "files", "live")  # job.QUERY_GROUPS (a test keeps them equal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="headwater-pipeline", description=__doc__)
    parser.add_argument("--env-file", type=Path,
                        default=stack_env_file(),
                        help="endpoints written by `make up`, if the file exists (the process environment wins "
                             "over it; default $HEADWATER_STATE_DIR/stack.env, else .headwater/stack.env)")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the streaming job (until stopped)")
    run.add_argument("--available-now", action="store_true", help="process what the topic holds now, then exit")
    run.add_argument("--console", action="store_true", help="also print the live aggregates")
    run.add_argument("--queries", choices=QUERY_GROUPS, default="all",
                     help="all queries in one application (default), or only the live aggregates / the Parquet "
                          "outputs, to run them as two applications")
    run.add_argument("--output", type=storage_root, help="output root, a path or a Hadoop URI such as "
                                                        "hdfs://nn:8020/headwater (default HEADWATER_PIPELINE_DIR)")
    replay = sub.add_parser("replay", help="recompute the aggregates from an offset range (batch)")
    replay.add_argument("--output", type=storage_root, required=True,
                        help="folder for the replay's Parquet outputs (a path or a Hadoop URI)")
    replay.add_argument("--starting-offsets", default="earliest", help="'earliest' or Spark's offsets JSON")
    replay.add_argument("--ending-offsets", default="latest", help="'latest' or Spark's offsets JSON")
    audit = sub.add_parser("audit", help="print the seq-gap loss audits: batch over the events output, "
                                         "and the streaming job's loss_audit output")
    audit.add_argument("--output", type=storage_root, help="output root (default HEADWATER_PIPELINE_DIR)")
    rules_cli.add_commands(sub.add_parser("rules", help="streaming SQL rules: apply, list, show, delete, test "
                                                        "(docs/rules.md)"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        file_env = read_env(args.env_file) if args.env_file.is_file() else {}
        cfg = PipelineConfig.from_env({**file_env, **os.environ}, "RULES" if args.command == "rules" else "PIPELINE")
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "output", None) and args.command != "replay":
        cfg = cfg.with_overrides(output_dir=args.output)

    if args.command == "rules":
        return rules_cli.run(args, cfg)
    # The queries' modules (pandas among them) load only for the commands that run queries: `rules apply` answered
    # by the running pipeline needs none of them, and they were 0.3 s of its CPU.
    from spark_pipeline import job  # noqa: PLC0415
    from spark_pipeline.audit import net_loss  # noqa: PLC0415
    if args.command == "run":
        if args.console:
            cfg = cfg.with_overrides(console=True)
        try:
            job.run(cfg, available_now=args.available_now, group=args.queries)
        except KeyboardInterrupt:
            return 130
        return 0
    if args.command == "replay":
        counts = job.replay(cfg, args.output, args.starting_offsets, args.ending_offsets)
        for name in ("counts_1m", "aggregates", "loss_audit", "deadletter"):
            print(f"{name}: {counts[name]} rows -> {join(args.output, name)}")
        print(json.dumps({"replay": args.output, **counts}))
        return 0
    out = job.Outputs(cfg.output_dir)
    spark = build_session("headwater-audit")
    has_events, has_stream = (job.committed_output(spark, path) for path in (out.events, out.loss_audit))
    if not (has_events or has_stream):
        print(f"no events or loss_audit output under {out.root}: run `python -m spark_pipeline run` first",
              file=sys.stderr)
        return 1
    if has_events:
        print(f"batch loss audit over {out.events} (every hole up to each producer's highest seq):")
        job.audit(cfg, spark).orderBy(F.desc("missing"), "producer_id").show(100, truncate=False)
    if has_stream:
        reports = spark.read.parquet(out.loss_audit)
        print(f"streaming loss audit {out.loss_audit}, per producer (still_missing = reported - arrived late):")
        net_loss(reports).orderBy(F.desc("still_missing"), "producer_id").show(100, truncate=False)
        print("its rows, newest first:")
        reports.drop("date").orderBy(F.desc("detected_at"), "producer_id", "first_seq").show(100, truncate=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
