"""`python -m spark_pipeline rules apply|list|show|delete|test`: manage the streaming SQL rules (docs/rules.md).

`apply` analyses the rule against the live views (built over the events topic and the registry as the running
pipeline builds them; nothing is read), registers its output schema (BACKWARD compatible), creates its output
topic and stores it; a refused rule stores nothing and exits 2 with `line N: <code>: <message>` (the 33rd rule
too: apply it again once one is deleted). Applying unchanged SQL changes nothing, unless the pipeline quarantined
that version: then it is stored as the next version, which the pipeline runs. `list` and `show` read the rules
and their statuses from Kafka (no Spark) and print every stored text through display.printable (no terminal
escapes), `list` also the records it skipped; `delete` writes a tombstone (also for a skipped record's key);
`test` runs the rule as a batch over the last N minutes of the events topic and prints the rows.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import socket
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import fastavro
from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from common.kafka_security import KafkaSecurity
from common.registry_client import RegistryClient, RegistryClientError
from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules import checks, class_archive, model, output, store
from spark_pipeline.rules.analyse import analyse, analysed
from spark_pipeline.rules.display import printable
from spark_pipeline.rules.functions import load_functions, register_functions
from spark_pipeline.rules.model import MAX_RULES, Rule, RuleError, RuleStatus
from spark_pipeline.session import build_session, under_spark_submit
from spark_pipeline.snapshot import take_snapshot

REFUSED = 2
NOT_FOUND = 1
log = logging.getLogger("spark_pipeline.rules")


def add_commands(rules: argparse.ArgumentParser) -> None:
    """The subcommands of `rules`."""
    sub = rules.add_subparsers(dest="rules_command", required=True)
    apply = sub.add_parser("apply", help="analyse a rule, register its output schema and store it")
    apply.add_argument("file", type=Path, help="a file holding one SQL SELECT")
    apply.add_argument("--name", help="the rule's name (default: the file name without .sql)")
    apply.add_argument("--analyse-here", action="store_true",
                       help="analyse in this process's own JVM, not in the running pipeline's")
    sub.add_parser("list", help="every rule with its state, and the installed SQL functions")
    show = sub.add_parser("show", help="one rule: SQL, version, output topic, subject and schema, status")
    show.add_argument("name")
    delete = sub.add_parser("delete", help="delete a rule (the pipeline stops its query)")
    delete.add_argument("name")
    test = sub.add_parser("test", help="run a rule as a batch over the last minutes of the events topic")
    test.add_argument("file", type=Path)
    test.add_argument("--minutes", type=int, default=10, help="how far back to read (default 10)")
    test.add_argument("--rows", type=int, default=50, help="how many result rows to print (default 50)")


def run(args: argparse.Namespace, cfg: PipelineConfig) -> int:
    """Run `rules <subcommand>`; the exit code (0, 1 not found, 2 refused or bad input)."""
    try:
        if args.rules_command == "list":
            return list_rules(cfg)
        if args.rules_command == "show":
            return show(cfg, args.name)
        if args.rules_command == "delete":
            return delete(cfg, args.name)
        if args.rules_command == "apply":
            return apply(cfg, args.file, args.name, remote=not args.analyse_here)
        return test(cfg, args.file, args.minutes, args.rows)
    except RuleError as exc:
        print(exc.describe(), file=sys.stderr)
        return REFUSED
    except (store.StoreError, RegistryClientError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return NOT_FOUND


def read_sql(path: Path) -> str:
    try:
        sql = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(model.NOT_A_SELECT, None, f"cannot read {path}: {exc}") from None
    if len(sql.encode()) > model.MAX_SQL_BYTES:
        raise RuleError(model.TOO_LARGE, None, f"{path} is over {model.MAX_SQL_BYTES} bytes")
    return sql


# `rules apply` only plans: no Spark job runs, so its JVM starts light (one task slot, the client compiler, the
# serial collector), which halved its start on a busy 2-core host. SPARK_MASTER still wins; under spark-submit, or
# when this process already has a session (the benchmark's pipeline), nothing changes. It starts from the JDK class
# archive of the runs before it (class_archive.py).
PLAN_ONLY_MASTER = "local[1]"
PLAN_ONLY_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xshare:auto"


def session(plan_only: bool = False) -> SparkSession:
    """The CLI's SparkSession; `plan_only` for a command that analyses but runs no job (`apply`)."""
    if plan_only and SparkSession.getActiveSession() is None:
        options = PLAN_ONLY_JAVA_OPTIONS if under_spark_submit() else class_archive.java_options(PLAN_ONLY_JAVA_OPTIONS)
        spark = build_session("headwater-rules", master=os.environ.get("SPARK_MASTER") or PLAN_ONLY_MASTER,
                              extra_conf={"spark.driver.extraJavaOptions": options})
    else:
        spark = build_session("headwater-rules")
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def live_views(spark: SparkSession, cfg: PipelineConfig, rules: dict[str, Rule], *, streaming: bool = True,
               since_ms: int | None = None, sql: str | None = None) -> None:
    """Register the functions and the views (streaming, or a batch from `since_ms`) in `spark`: with `sql`, only
    those it can name (views.named_in: the rule analyses the same, and the views it cannot read cost nothing)."""
    # The views' modules (pandas UDFs among them) load here, not with the command: `rules apply` answered by the
    # running pipeline (checks.py) never needs them, and importing them took 0.3 s of its CPU.
    from spark_pipeline import enrich  # noqa: PLC0415
    from spark_pipeline.rules.views import (  # noqa: PLC0415
        inventory_needed,
        named_in,
        pipeline_events,
        register_views,
    )

    registry = RegistryClient.of(cfg.registry_url, cfg.registry_access)
    snapshot = take_snapshot(registry, cfg.subject_prefix)
    inventory = enrich.read_inventory(spark, cfg.nodes_file) if inventory_needed(cfg, streaming=streaming) else None
    events = pipeline_events(spark, cfg, snapshot, inventory, streaming=streaming, since_ms=since_ms)
    names = None if sql is None else named_in(sql)
    register_functions(spark, [f for f in load_functions() if names is None or f.name.lower() in names])
    register_views(spark, events, snapshot, rules, bootstrap=cfg.bootstrap, subject_prefix=cfg.subject_prefix,
                   lateness=cfg.lateness, registry=registry, security=cfg.kafka_security, only=names)


def _quarantined(rules_store: store.RuleStore, rule: Rule) -> bool:
    status = rules_store.statuses().get(rule.name)
    return status is not None and status.state == "quarantined" and status.version == rule.version


def check_output(name: str, schema: StructType) -> None:
    """Refuse (invalid_column) an output whose Avro schema the registry would reject (e.g. two nested records of
    one name), before anything is registered."""
    try:
        fastavro.parse_schema(output.avro_schema(name, schema))
    except (fastavro.schema.SchemaParseException, ValueError, TypeError) as exc:
        raise RuleError(model.INVALID_COLUMN, None, f"the output has no valid Avro schema ({exc}): rename the "
                                                    "nested columns with AS") from None


def applied_by(security: KafkaSecurity) -> str:
    """Who applies a rule: the authenticated Kafka principal when the cluster has authentication (its ACLs let
    only the rules principal write the rules topic), then the operator's login and host for the record."""
    local = f"{getpass.getuser()}@{socket.gethostname()}"
    who = f"User:{security.username} ({local})" if security.sasl else local
    return who[: model.MAX_APPLIED_BY_CHARS]


def analysed_remotely(cfg: PipelineConfig, name: str, sql: str, topics: store.Topics | None = None,
                      producer: Producer | None = None) -> checks.Checked | None:
    """The running pipeline's analysis (checks.py); None: none answered. RuleError: it refused the rule."""
    began = time.monotonic()
    answer = checks.ask(cfg.bootstrap, name, sql, cfg.kafka_security, cfg.rules_check_wait_s, topics=topics,
                        producer=producer)
    if isinstance(answer, RuleError):
        raise answer
    if answer is not None:
        log.info("rule %s analysed by the running pipeline in %.2f s", name, time.monotonic() - began)
    return answer


def analysed_here(cfg: PipelineConfig, name: str, sql: str, rules: dict[str, Rule]) -> checks.Checked:
    """The analysis in this process's own Spark session (its JVM started from the class archive)."""
    began = time.monotonic()
    spark = session(plan_only=True)
    started = time.monotonic()
    live_views(spark, cfg, {n: r for n, r in rules.items() if n != name}, sql=sql)
    built = time.monotonic()
    analysis = analyse(spark, sql)
    log.debug("apply %s: Spark session %.2f s, views %.2f s, the gate and analysis %.2f s", name,
              started - began, built - started, time.monotonic() - built)
    return checks.Checked(analysis.schema, analysis.key_columns, analysis.aggregation, analysis.output_mode)


def apply(cfg: PipelineConfig, path: Path, name: str | None, remote: bool = True) -> int:
    sql = read_sql(path)
    name = model.check_name(name or path.stem)
    topics = store.Topics(cfg.bootstrap, cfg.kafka_security)  # one admin client for every topic step below
    rules_store = store.RuleStore(cfg.bootstrap, security=cfg.kafka_security, topics=topics)
    try:
        rules = rules_store.latest_rules()
        previous = rules.get(name)
        if previous is None and len(rules) >= MAX_RULES:
            raise RuleError(model.TOO_MANY_RULES, None, f"{len(rules)} rules stored, the limit is {MAX_RULES}: "
                                                        "nothing stored; delete one, then apply this one again")
        if previous is not None and previous.sql.strip() == sql.strip() and not _quarantined(rules_store, previous):
            print(f"rule {name} unchanged: version {previous.version} stays")
            return 0
        model.check_acyclic(name, sql, rules)
        analysis = analysed_remotely(cfg, name, sql, topics, rules_store.producer) if remote else None
        if analysis is None:
            analysis = analysed_here(cfg, name, sql, rules)
        check_output(name, analysis.schema)
        try:
            schema_id = output.register_output(RegistryClient.of(cfg.registry_url, cfg.registry_access), name,
                                               analysis.schema)
        except RegistryClientError as exc:
            if exc.status != 422:
                raise
            raise RuleError(model.INVALID_COLUMN, None, f"the registry refused the output schema: {exc}") from None
        store.ensure_output_topic(cfg.bootstrap, name, compacted=bool(analysis.aggregation),
                                  security=cfg.kafka_security, topics=topics)
        rule = Rule(name, sql, (previous.version + 1) if previous else 1, int(time.time() * 1000),
                    applied_by(cfg.kafka_security), schema_id,
                    analysis.key_columns, analysis.aggregation, analysis.output_mode, uid=uuid.uuid4().hex[:12])
        rules_store.put(rule)
    finally:
        rules_store.close()
    kind = "aggregation" if rule.aggregation else "filter/routing"
    print(f"applied rule {name} version {rule.version} ({kind}, {rule.output_mode} mode, keyed by "
          f"{', '.join(rule.key_columns) or 'nothing'})")
    print(f"output: topic {rule.topic}, subject {rule.subject}, schema id {schema_id}")
    return 0


def _ms(value: int | None) -> str:
    if value is None:
        return "-"
    return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _status_line(status: RuleStatus | None, rule: Rule) -> str:
    if status is None:
        return "state: not reported yet (is the pipeline running?)"
    stale = " (status of an older version)" if status.version != rule.version else ""
    held = " (not run until applied again)" if status.state == "quarantined" else ""
    parts = [f"state: {status.state}{stale}{held}", f"rows/s: {status.rows_per_s:.1f}",
             f"last batch: {_ms(status.last_batch_at)}", f"lag: {'-' if status.lag is None else status.lag}"]
    if status.tier is not None:
        why = f" ({printable(status.tier_reason, limit=300)})" if status.tier_reason else ""
        parts.append(f"tier: {printable(status.tier, limit=40)}{why}")
    if status.fresh_start:
        parts.append("fresh start (new checkpoint)")
    if status.retry_at is not None:
        parts.append(f"retry at {_ms(status.retry_at)}")
    if status.error:
        parts.append(f"error: {printable(status.error, limit=1000)}")
    return ", ".join(parts)


def list_rules(cfg: PipelineConfig) -> int:
    rules_store = store.RuleStore(cfg.bootstrap, security=cfg.kafka_security)
    try:
        (rules, skipped), statuses = rules_store.rules_and_skipped(), rules_store.statuses()
    finally:
        rules_store.close()
    print(f"{len(rules)} rule(s) of at most {MAX_RULES}")
    for name, rule in sorted(rules.items()):
        print(f"{name} v{rule.version} -> {rule.topic}: {_status_line(statuses.get(name), rule)}")
    if skipped:
        print(f"{len(skipped)} record(s) of {model.RULES_TOPIC} skipped (`rules delete KEY` removes one):")
        for key, why in sorted(skipped.items()):
            print(f"  key {printable(repr(key), limit=120)}: {printable(why, limit=300)}")
    functions = load_functions()
    print(f"{len(functions)} SQL function(s) installed")
    for f in functions:
        print(f"  {printable(f.signature())}  [{printable(f.source)}]  {printable(f.doc)}")
    return 0


def show(cfg: PipelineConfig, name: str) -> int:
    rules_store = store.RuleStore(cfg.bootstrap, security=cfg.kafka_security)
    try:
        rule = rules_store.latest_rules().get(model.check_name(name))
        status = rules_store.statuses().get(name)
    finally:
        rules_store.close()
    if rule is None:
        print(f"no rule {name}", file=sys.stderr)
        return NOT_FOUND
    print(f"rule {rule.name} version {rule.version}, applied {_ms(rule.applied_at)} UTC by "
          f"{printable(rule.applied_by)}")
    print(f"kind: {'aggregation' if rule.aggregation else 'filter/routing'}, {rule.output_mode} mode, keyed by "
          f"{', '.join(rule.key_columns) or 'nothing'}")
    print(f"output: topic {rule.topic}, subject {rule.subject}, schema id {rule.output_schema_id}")
    if rule.output_schema_id is not None:
        got = RegistryClient.of(cfg.registry_url, cfg.registry_access).call(
            "GET", f"/schemas/ids/{rule.output_schema_id}")
        print(f"schema: {printable(got.get('schema') if isinstance(got, dict) else got, limit=20_000)}")
    print(_status_line(status, rule))
    print("sql:")
    print(printable(rule.sql.rstrip(), multiline=True))
    return 0


def delete(cfg: PipelineConfig, name: str) -> int:
    rules_store = store.RuleStore(cfg.bootstrap, security=cfg.kafka_security)
    try:
        rules, skipped = rules_store.rules_and_skipped()
        if name in skipped and name not in rules:
            rules_store.delete_skipped(name)
            print(f"deleted the skipped record keyed {printable(repr(name))}")
            return 0
        if model.check_name(name) not in rules:
            print(f"no rule {name}", file=sys.stderr)
            return NOT_FOUND
        rules_store.delete(name)
    finally:
        rules_store.close()
    print(f"deleted rule {name} (the pipeline stops its query; topic {model.output_topic(name)} is kept)")
    return 0


def test(cfg: PipelineConfig, path: Path, minutes: int, rows: int) -> int:
    if minutes <= 0 or rows <= 0:
        raise RuleError(model.ANALYSIS_ERROR, None, "--minutes and --rows must be positive")
    sql = read_sql(path)
    rules_store = store.RuleStore(cfg.bootstrap, security=cfg.kafka_security)
    try:
        rules = rules_store.latest_rules()
    finally:
        rules_store.close()
    spark = session()
    live_views(spark, cfg, rules, sql=sql)
    analyse(spark, sql)  # refused exactly as `apply` would
    since = int(time.time() * 1000) - minutes * 60_000
    live_views(spark, cfg, rules, streaming=False, since_ms=since, sql=sql)
    result: DataFrame = analysed(spark, sql)
    shown = result.limit(rows + 1).collect()
    print(f"rule {path.name} over the events since {_ms(since)} UTC: {min(len(shown), rows)} row(s)"
          f"{' (more not shown)' if len(shown) > rows else ''}")
    for row in shown[:rows]:
        print(json.dumps(row.asDict(recursive=True), default=str, sort_keys=False))
    return 0
