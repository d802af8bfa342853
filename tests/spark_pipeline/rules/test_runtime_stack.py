"""The rule runtime end to end on the real stack: SDK producers -> gateway -> Kafka -> the running pipeline
(`job.run`: the shared enriched stream in real-time mode, the rule manager, the packed real-time queries and the
micro-batch rules) -> `headwater.rule.<name>` topics, read back and compared with what was sent. One pipeline run
serves the checks in order (it is restarted by the last one)."""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import headwater
import pytest

from common.registry_client import RegistryClient
from loadtest.events import EventFactory
from spark_pipeline import job
from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules import cli, runtime
from spark_pipeline.rules.model import Rule, RuleStatus
from spark_pipeline.rules.store import RuleStore
from spark_pipeline.rules.tiers import Placement
from tests.sdk_events import Decoder
from tests.spark_pipeline.truth import new_topic
from tests.support.kafka import consume_all, end_offsets
from tests.support.ports import free_port
from tests.support.wait import wait_for as support_wait_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark, pytest.mark.integration]

EVENTS_TOPIC = "headwater.events"
WAIT_S = 300.0  # generous: a rule's first micro-batch took minutes on a 2-core host shared by six test runs


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    """tests/support/wait.py's wait, polled once a second (a micro-batch's pace) with this module's long default."""
    return support_wait_for(what, check, timeout_s, interval_s=1.0)


@dataclass
class Sender:
    """One SDK client sending events of chosen types through the gateway; remembers (id, type, created ms)."""

    env: dict[str, str]
    spool: Path
    sent: list[tuple[str, str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = headwater.Client(self.env["GATEWAY_URL"], self.env["HEADWATER_WRITE_KEY"],
                                       spool_dir=str(self.spool), node_id="node-0001", linger_s=0.1)
        self.factory = EventFactory(seed=7)

    @property
    def producer_id(self) -> str:
        return self.client.producer_id

    def send(self, count: int, spacing_s: float = 0.02) -> None:
        for _ in range(count):
            now = int(time.time() * 1000)
            event = self.factory.event(self.producer_id, "node-0001", 0, now)
            self.client.track(str(event["event_type"]), event["properties"], event_id=str(event["event_id"]),
                              timestamp=now / 1000)
            self.sent.append((str(event["event_id"]), str(event["event_type"]), now))
            time.sleep(spacing_s)
        assert self.client.flush(60)

    def minute_counts(self) -> dict[tuple[int, str], int]:
        return dict(Counter((t - t % 60_000, kind) for _, kind, t in self.sent))


def latest_by_key(bootstrap: str, registry_url: str, topic: str) -> dict[bytes, dict[str, Any]]:
    """The last record per key of a rule's output topic, decoded with its writer schema from the registry."""
    decode = Decoder(registry_url)
    out: dict[bytes, dict[str, Any]] = {}
    for msg in consume_all(bootstrap, topic, "read_uncommitted", timeout_s=20):
        value = msg.value()
        if value is not None:
            out[msg.key() or b""] = decode(value)
    return out


def window_counts(rows: dict[bytes, dict[str, Any]]) -> dict[tuple[int, str], int]:
    return {(int(r["w"]["start"].timestamp() * 1000), str(r["event_type"])): int(r["events"]) for r in rows.values()}


@dataclass
class Pipeline:
    """The running pipeline (job.run in a thread) and what the checks share."""

    spark: SparkSession
    cfg: PipelineConfig
    env: dict[str, str]
    store: RuleStore
    sender: Sender
    thread: threading.Thread | None = None
    errors: list[BaseException] = field(default_factory=list)
    log_file: Path | None = None

    def start(self) -> None:
        def run() -> None:
            try:
                job.run(self.cfg, spark=self.spark, group="live")
            except BaseException as exc:  # reported by the checks
                self.errors.append(exc)

        self.thread = threading.Thread(target=run, name="pipeline", daemon=True)
        self.thread.start()
        wait_for("the built-in live query", self.builtin_active, 2 * WAIT_S)

    def builtin_active(self) -> bool:
        return any(q.name == "aggregates_live" and q.isActive for q in self.spark.streams.active)

    def rule_query_objects(self) -> dict[str, Any]:
        managers = runtime.running()
        return {str(q.name): q for q in managers[-1].queries().values() if q.isActive} if managers else {}

    def rule_queries(self) -> list[str]:
        return sorted(self.rule_query_objects())

    def describe(self, name: str) -> str:
        """What a failed wait reports: the pipeline thread, the manager's slot and the pack of rule `name`, and the
        pipeline log's tail (the checks run for minutes on a loaded CI host: the log says where the rule stopped)."""
        alive = self.thread is not None and self.thread.is_alive()
        managers = runtime.running()
        lines = [f"pipeline thread alive: {alive}; its errors: {[str(e)[:500] for e in self.errors]}; rule "
                 f"managers: {len(managers)}"]
        manager = managers[-1] if managers else None
        if manager is not None:
            slot = manager.slots.get(name)
            lines += [f"slot: {None if slot is None else (slot.state, slot.error, slot.tier, slot.retry_at)}",
                      f"query objects: {sorted(self.rule_query_objects())}"]
        if isinstance(manager, runtime.PipelineRules):
            launcher = manager.spark_launcher
            for pack in [launcher.pack, *launcher.aggregate_packs.values()]:
                st = pack.state()
                q = None if st.query is None else (st.query.runId, st.query.isActive)
                lines.append(f"pack {pack.name}: members {list(st.members)}, running {list(st.running)}, pending "
                             f"{st.pending}, error {st.error!r:.300}, query {q}")
        if self.log_file is not None and self.log_file.exists():
            logged = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()
            # Not the warnings of this test's own reads of the shared rule topics (other modules' hostile records).
            lines += ["pipeline log (last 60 lines):", *[x for x in logged if "skipping the record" not in x][-60:]]
        return "\n".join(lines)

    def stop(self) -> None:
        for q in self.spark.streams.active:
            if not str(q.name).startswith("rule."):
                q.stop()
        assert self.thread is not None
        self.thread.join(120)
        assert not self.thread.is_alive() and not self.errors, f"{self.errors}\n{self.describe('')}"
        assert runtime.running() == []  # the manager stopped with the pipeline

    def apply(self, name: str, sql: str) -> Rule:
        """`rules apply` (analysis, output schema, topic, store) of `sql`; the stored rule."""
        path = Path(self.cfg.output_dir) / f"{name}.sql"
        path.write_text(sql, encoding="utf-8")
        assert cli.apply(self.cfg, path, name) == 0
        return self.store.latest_rules()[name]

    def status(self, name: str) -> RuleStatus | None:
        return self.store.statuses().get(name)

    def placement(self, name: str) -> Placement:
        manager = runtime.running()[-1]
        assert isinstance(manager, runtime.PipelineRules)
        placements = manager.spark_launcher.placements  # filled when the manager starts the rule (within a second)
        return wait_for(f"rule {name} placed in a tier", lambda: placements.get(name), 60)  # type: ignore[no-any-return]

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.cfg.metrics_port}/metrics", timeout=10) as resp:
            return str(resp.read().decode())

    def wait_state(self, name: str, state: str, version: int | None = None) -> RuleStatus:
        seen: list[RuleStatus | None] = [None]

        def check() -> RuleStatus | None:
            s = seen[0] = self.status(name)
            return s if s is not None and s.state == state and version in (None, s.version) else None

        try:
            return wait_for(f"rule {name} {state}", check)  # type: ignore[no-any-return]
        except AssertionError as exc:
            raise AssertionError(f"{exc}; its last status: {seen[0]}\n{self.describe(name)}") from None


@pytest.fixture(scope="module")
def pipeline(spark: SparkSession, stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Pipeline]:
    bootstrap, registry_url = stack_env["KAFKA_BOOTSTRAP"], stack_env["REGISTRY_URL"]
    # The pipeline reads this module's era of the shared events topic only (other tests write to it too), into an
    # enriched topic of its own, which the rules read from its start.
    starts = end_offsets(bootstrap, EVENTS_TOPIC)
    offsets = json.dumps({EVENTS_TOPIC: {str(p): o for p, o in starts.items()}})
    out = tmp_path_factory.mktemp("rules-pipeline")
    handler = logging.FileHandler(out / "pipeline.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    logger = logging.getLogger("spark_pipeline")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    cfg = PipelineConfig(bootstrap=bootstrap, registry_url=registry_url, events_topic=EVENTS_TOPIC,
                         aggregates_topic=new_topic(bootstrap, "test.rules.aggregates"), output_dir=str(out),
                         lateness="10 minutes", registry_poll_s=3, starting_offsets=offsets,
                         enriched_topic=f"test.rules.enriched.{uuid.uuid4().hex[:10]}", metrics_port=free_port(),
                         realtime_batch="5 seconds", rules_realtime=True)
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"HEADWATER_RULE_STARTING_OFFSETS": "earliest", "HEADWATER_RULE_BACKOFF_S": "3",
                           "HEADWATER_RULE_BACKOFF_MAX_S": "30", "HEADWATER_RULE_STATUS_S": "1"}.items():
            mp.setenv(key, value)
        p = Pipeline(spark, cfg, stack_env, RuleStore(bootstrap), Sender(stack_env, out / "spool"),
                     log_file=out / "pipeline.log")
        p.start()
        try:
            yield p
        finally:
            for name in p.store.latest_rules():
                if name.startswith(("counts_", "route_", "bad_", "probe_")):
                    p.store.delete(name)  # this module's rules: other tests share the rules topic
            if p.thread is not None and p.thread.is_alive():
                p.stop()
            p.sender.client.close(30)
            logger.removeHandler(handler)
            logger.setLevel(level)
            handler.close()


def batch_id(query: Any) -> int:
    progress = query.lastProgress
    return -1 if progress is None else int(progress["batchId"])


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def counts_sql(producer_id: str, minutes: int = 1) -> str:
    return (f"SELECT window(event_time, '{minutes} minute') AS w, event_type, count(*) AS events\n"
            f"FROM events\nWHERE producer_id = '{producer_id}'\n"
            f"GROUP BY window(event_time, '{minutes} minute'), event_type")


@pytest.fixture(scope="module")
def counts(pipeline: Pipeline) -> Rule:
    """A windowed count over this module's producer, applied while its events flow (used by several checks)."""
    flow = threading.Thread(target=pipeline.sender.send, args=(100, 0.05))
    flow.start()
    time.sleep(2)  # events are flowing
    rule = pipeline.apply(f"counts_{suffix()}", counts_sql(pipeline.sender.producer_id))
    flow.join()
    return rule


def converged(p: Pipeline, rule: Rule) -> dict[tuple[int, str], int] | None:
    got = window_counts(latest_by_key(p.cfg.bootstrap, p.cfg.registry_url, rule.topic))
    return got if got and got == p.sender.minute_counts() else None


def wait_converged(p: Pipeline, rule: Rule, what: str) -> None:
    """Wait until the rule's latest counts equal the sender's; on a timeout say which windows differ."""
    try:
        wait_for(what, lambda: converged(p, rule))
    except AssertionError as exc:
        got = window_counts(latest_by_key(p.cfg.bootstrap, p.cfg.registry_url, rule.topic))
        want = p.sender.minute_counts()
        diff = {k: (got.get(k), want.get(k)) for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)}
        raise AssertionError(f"{exc}; windows (got, sent) that differ: {diff}; {enriched_repeats(p)}\n"
                             f"{p.describe(rule.name)}") from None


def enriched_keys(p: Pipeline) -> Counter[str]:
    """How many times the shared enriched topic holds each of the sender's events (it is keyed by event_id)."""
    mine = {i for i, _, _ in p.sender.sent}
    return Counter(k.decode() for m in consume_all(p.cfg.bootstrap, p.cfg.enriched_topic, "read_uncommitted")
                   if (k := m.key()) is not None and k.decode() in mine)


def enriched_repeats(p: Pipeline) -> str:
    keys = enriched_keys(p)
    repeated = sum(1 for n in keys.values() if n > 1)
    return f"the enriched topic holds {len(keys)} of the {len(p.sender.sent)} events sent, {repeated} of them repeated"


@pytest.mark.timeout(1200)
def test_a_rule_applied_while_events_flow_equals_an_independent_count(pipeline: Pipeline, counts: Rule) -> None:
    p = pipeline
    status = p.wait_state(counts.name, "running")
    assert (status.version, status.fresh_start, status.error) == (counts.version, False, None)
    assert status.tier == "realtime" and "windowed aggregation" in (status.tier_reason or "")  # `rules list` says
    wait_converged(p, counts, f"{counts.topic} to equal the counts of the {len(p.sender.sent)} events sent")
    assert p.builtin_active()
    # A real-time query reports progress when its batch ends (every `realtime_batch`): the lag is as of then.
    s = wait_for("a status with throughput and a lag of at most 10 records",
                 lambda: (x := p.status(counts.name)) and x.last_batch_at and x.lag is not None and x.lag <= 10 and x)
    assert s.rows_per_s >= 0
    assert p.placement(counts.name).tier == "realtime"  # a windowed count: packed
    series = f'headwater_rule_state{{rule="{counts.name}",state="running",tier="realtime"}} 1.0'  # labels sorted
    seen = [""]

    def exposes() -> str | None:
        seen[0] = p.metrics()
        return seen[0] if series in seen[0] else None

    try:
        exposed = wait_for("the rule's series on /metrics", exposes, 60)
    except AssertionError as exc:
        lines = [x for x in seen[0].splitlines() if x.startswith(("headwater_rule_state", "headwater_query_active"))]
        raise AssertionError(f"{exc}; its series: {lines}") from None
    assert 'headwater_query_active{query="enriched"} 1.0' in exposed
    # The shared stream's series come with its first real-time batch's end (`realtime_batch`, 5 s here).
    latency = 'headwater_query_latency_seconds{quantile="0.99",query="enriched"}'
    wait_for("the shared stream's latency on /metrics", lambda: latency in p.metrics(), 60)


@pytest.mark.timeout(600)
def test_events_the_shared_stream_repeats_are_counted_once(pipeline: Pipeline, counts: Rule) -> None:
    """The `enriched` query's Kafka sink is at least once (a batch replayed after a restart writes its records
    again): here five of the sender's records are written to the internal topic a second time, verbatim, and the
    rule's counts must not move."""
    from confluent_kafka import Producer

    p = pipeline
    wait_converged(p, counts, "the rule's output before the repeats")
    mine = {i for i, _, _ in p.sender.sent}
    records = [m for m in consume_all(p.cfg.bootstrap, p.cfg.enriched_topic, "read_uncommitted")
               if (k := m.key()) is not None and k.decode() in mine][:5]
    assert len(records) == 5
    producer = Producer({"bootstrap.servers": p.cfg.bootstrap, "enable.idempotence": True})
    for m in records:
        producer.produce(p.cfg.enriched_topic, key=m.key(), value=m.value())
    assert producer.flush(30) == 0
    p.sender.send(3)  # and fresh events after them
    wait_converged(p, counts, "the rule's output, the repeats counted once")
    assert sum(1 for n in enriched_keys(p).values() if n > 1) >= 5  # the repeats are there, counted once


def test_a_rule_replaced_then_deleted_while_running(pipeline: Pipeline) -> None:
    p, name = pipeline, f"route_{suffix()}"
    first = p.apply(name, f"SELECT event_id, event_type FROM events WHERE producer_id = '{p.sender.producer_id}'")
    p.wait_state(name, "running")
    second = p.apply(name, f"SELECT event_id, event_type FROM events\nWHERE producer_id = '{p.sender.producer_id}' "
                           "AND event_type = 'page_view'")
    assert second.version == first.version + 1
    status = p.wait_state(name, "running", second.version)
    assert status.fresh_start
    assert f"rule.{name}.v{second.version}" in p.rule_queries()
    assert f"rule.{name}.v{first.version}" not in p.rule_queries()
    checkpoints = Path(p.cfg.checkpoint_dir) / "rules" / name
    assert sorted(d.name for d in checkpoints.iterdir()) == [second.checkpoint_id]
    # A packed rule joins its pack where the pack reads (a pack restarts from its checkpoint): it sees the events
    # sent from now on; only page views.
    before = len(p.sender.sent)
    p.sender.send(12)
    views = {i for i, kind, _ in p.sender.sent[before:] if kind == "page_view"}
    assert views

    def output() -> list[dict[str, Any]]:
        return list(latest_by_key(p.cfg.bootstrap, p.cfg.registry_url, second.topic).values())

    wait_for("the new version's output to hold the page views sent since",
             lambda: {str(r["event_id"]) for r in output()} >= views)
    since = {i for i, _, _ in p.sender.sent[before:]}  # the topic holds the first version's records as well
    assert {r["event_type"] for r in output() if str(r["event_id"]) in since} == {"page_view"}
    p.store.delete(name)
    wait_for(f"rule {name}'s query to stop", lambda: not any(q.startswith(f"rule.{name}.") for q in p.rule_queries()))
    wait_for(f"rule {name}'s status to go", lambda: p.status(name) is None)
    assert not checkpoints.exists() and p.builtin_active()


def output_ids(p: Pipeline, rule: Rule) -> set[str]:
    return {str(r["event_id"]) for r in latest_by_key(p.cfg.bootstrap, p.cfg.registry_url, rule.topic).values()}


@pytest.mark.timeout(600)
def test_a_rule_failing_at_run_time_is_isolated_and_retried(pipeline: Pipeline, counts: Rule) -> None:
    p, name = pipeline, f"bad_{suffix()}"
    good = p.apply(f"route_{suffix()}", f"SELECT event_id, event_type FROM events "
                                        f"WHERE producer_id = '{p.sender.producer_id}'")
    p.wait_state(good.name, "running")
    packed = p.rule_query_objects()[f"rule.{good.name}.v{good.version}"]
    run_id = packed.runId
    # Analyses clean (a string may be cast to INT); fails in its first batch under ANSI mode. A rule that may fail
    # never shares a query: it runs in its own micro-batch query.
    p.apply(name, f"SELECT event_id, CAST(event_type AS INT) AS n FROM events WHERE producer_id = "
                  f"'{p.sender.producer_id}'")
    placement = p.placement(name)
    assert placement.tier == "microbatch" and "CAST(string AS int) may fail" in placement.reason
    failed = p.wait_state(name, "failed")
    assert failed.tier == "microbatch" and "may fail" in (failed.tier_reason or "")
    assert failed.error is not None and "CAST_INVALID_INPUT" in failed.error and "\n" not in failed.error
    assert failed.retry_at is not None and failed.retry_at > failed.updated_at

    def failed_again() -> RuleStatus | None:
        s = p.status(name)
        return s if s is not None and s.state == "failed" and (s.retry_at or 0) > (failed.retry_at or 0) else None

    again = wait_for("a retry that fails again", failed_again)
    # Backoff 3 s, then 6 s: the second retry is due at least 6 s after the first one was.
    assert (again.retry_at or 0) - (failed.retry_at or 0) >= 6000
    before = len(p.sender.sent)
    p.sender.send(5)  # the other rules and the built-in query go on
    assert p.wait_state(counts.name, "running").error is None
    wait_converged(p, counts, "the other rule to count the new events")
    sent = {i for i, _, _ in p.sender.sent}
    new = {i for i, _, _ in p.sender.sent[before:]}
    got = wait_for("the packed filter's output to hold the new events", lambda: (o := output_ids(p, good)) >= new and o)
    assert got <= sent  # its own events only, none lost
    assert packed.runId == run_id and packed.isActive  # the shared query never stopped for the failing rule
    assert p.builtin_active()
    p.store.delete(name)
    p.store.delete(good.name)


def probe_schema(event_type: str, with_note: bool) -> str:
    """A test-only event type: page_view's envelope, properties {amount} (v2 adds an optional note)."""
    with open("schemas/events/page_view/v1.avsc", encoding="utf-8") as f:
        schema = json.load(f)
    props: list[dict[str, Any]] = [{"name": "amount", "type": "double"}]
    if with_note:
        props.append({"name": "note", "type": ["null", "string"], "default": None})
    fields = [f for f in schema["fields"] if f["name"] != "properties"]
    fields.append({"name": "properties", "type": {"type": "record", "name": f"{event_type}_properties",
                                                  "fields": props}})
    return json.dumps({"type": "record", "name": event_type, "namespace": "headwater.events", "fields": fields})


def post(env: dict[str, str], producer_id: str, seq: int, event_type: str, *, version: int,
         properties: dict[str, Any]) -> str:
    """One event of `event_type` at schema `version` through the gateway's JSON path; its event id."""
    event_id = str(uuid.uuid4())
    now = int(time.time() * 1000)
    body = {"batch_id": str(uuid.uuid4()), "sent_at": now, "sdk": {"name": "headwater-test", "version": "0"},
            "events": [{"event_id": event_id, "event_type": event_type, "producer_id": producer_id, "seq": seq,
                        "node_id": "node-0001", "created_at": now, "context": {}, "properties": properties,
                        "schema_version": version}]}
    req = urllib.request.Request(f"{env['GATEWAY_URL'].rstrip('/')}/v1/batch", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json",
                                                         "Authorization": f"Bearer {env['HEADWATER_WRITE_KEY']}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        answer = json.loads(resp.read())
    assert not answer.get("rejected"), answer
    return event_id


@pytest.mark.timeout(600)
def test_a_schema_version_added_while_a_rule_runs(pipeline: Pipeline) -> None:
    p, sfx = pipeline, suffix()
    kind = name = f"probe_{sfx}"
    registry = RegistryClient(p.cfg.registry_url)
    registry.register(f"headwater.events.{kind}", probe_schema(kind, with_note=False))
    producer = str(uuid.uuid4())
    rule = p.apply(name, f"SELECT event_id, amount FROM {kind}")
    ids = [post(p.env, producer, 0, kind, version=1, properties={"amount": 1.5})]
    p.wait_state(name, "running")
    run_id = p.rule_query_objects()[f"rule.{name}.v{rule.version}"].runId
    registry.register(f"headwater.events.{kind}", probe_schema(kind, with_note=True))
    ids.append(post(p.env, producer, 1, kind, version=2, properties={"amount": 2.5, "note": "v2"}))

    def restarted() -> bool:
        q = p.rule_query_objects().get(f"rule.{name}.v{rule.version}")
        return q is not None and q.runId != run_id

    try:
        wait_for("the rule restarted from its checkpoint for the new version", restarted)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; run {run_id}; status {p.status(name)}\n{p.describe(name)}") from None

    def both() -> set[str] | None:
        got = {str(r["event_id"]) for r in latest_by_key(p.cfg.bootstrap, p.cfg.registry_url, rule.topic).values()}
        return got if got == set(ids) else None

    wait_for("both versions' events in the rule's output", both)
    status = p.wait_state(name, "running")
    assert not status.fresh_start and status.error is None


@pytest.mark.timeout(1200)
def test_the_pipeline_restarted_with_rules_in_place_resumes_them(pipeline: Pipeline, counts: Rule) -> None:
    p = pipeline
    wait_converged(p, counts, "the rule's output before the restart")
    query = f"rule.{counts.name}.v{counts.version}"
    before = {name: batch_id(q) for name, q in p.rule_query_objects().items()}
    p.stop()
    assert p.status(counts.name).state == "stopped"  # type: ignore[union-attr]
    p.sender.send(10)  # while the pipeline is down
    p.start()
    status = p.wait_state(counts.name, "running")
    assert status.version == counts.version and not status.fresh_start
    wait_converged(p, counts, "the rule's output to count the events sent while it was down")
    # Its checkpoint's batch sequence goes on. A real-time query reports a batch only when the batch ends (every
    # `realtime_batch`), and its pack may restart once more as the other rules rejoin: wait for that report.
    wait_for(f"{query}'s batches to go on after batch {before[query]}",
             lambda: (q := p.rule_query_objects().get(query)) is not None and batch_id(q) > before[query],
             timeout_s=180)
    for name, rule in p.store.latest_rules().items():  # every stored rule is back
        if name.startswith(("counts_", "probe_")):
            p.wait_state(name, "running", rule.version)
