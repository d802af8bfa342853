"""created_at -> rule output latency per rule kind, at 1 rule and at 20, apply -> first output, and the built-in
10-second aggregate's latency, all against one running pipeline fed through the gateway.

Events are posted at `rate` events/s for the whole phase (created_at stamped at send). A measured window starts
on a 10-second boundary (so every aggregation key it measures was counted from its first event) and its outputs
are read back after it (`common.records`): an event's latency is its output record's Kafka timestamp minus its
created_at; for an aggregation, the first update of its key whose count covers the event's rank in that key (the
record that first counts it). An event without such a record within the drain is missing.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer

from bench.rules.common import Running, apply_rule, apply_rule_cli, log, records, wait
from bench.spark.generate import generate
from bench.spark.latency import regions
from common.avro_frame import WriterSchemas
from common.kafka_read import consumer_config, end_offsets
from common.registry_client import RegistryClient
from spark_pipeline.config import PipelineConfig
from spark_pipeline.rules.model import Rule
from spark_pipeline.rules.store import RuleStore

KINDS = ("filter", "routing", "projection", "aggregation")
FILTERED_OUT = "purchase"  # the filter rule drops this type
WINDOW_MS = 10_000
SLICE_MS = 20_000  # a long window also reports its worst slice of this length


def kind_sql(kind: str, producers: list[str]) -> str:
    ids = ", ".join(f"'{p}'" for p in producers)
    mine = f"producer_id IN ({ids})"
    return {
        "filter": f"SELECT event_id, created_at, event_type FROM events "
                  f"WHERE {mine} AND event_type <> '{FILTERED_OUT}'",
        "routing": f"SELECT event_id, created_at FROM events WHERE {mine}",
        "projection": f"SELECT event_id, created_at, upper(event_type) AS kind, concat(node_id, '/', event_type) "
                      f"AS place, length(producer_id) AS producer_chars FROM events WHERE {mine}",
        "aggregation": f"SELECT window(event_time, '10 seconds') AS w, producer_id, count(*) AS events FROM events "
                       f"WHERE {mine} GROUP BY window(event_time, '10 seconds'), producer_id",
    }[kind]


@dataclass
class Sent:
    event_id: str
    event_type: str
    producer: str
    created_ms: int
    region: str


@dataclass
class Sender:
    """Posts batches of 40 events to the gateway at `rate` events/s until stopped; every event sent, in order."""

    env: dict[str, str]
    cfg: PipelineConfig
    rate: int
    producers: list[str] = field(default_factory=lambda: [str(uuid.uuid4()) for _ in range(4)])
    sent: list[Sent] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        node_region = regions(self.cfg)
        pool = generate(10_000_000, producers=len(self.producers), spacing_ms=0, seed=int(time.time()))
        seqs = dict.fromkeys(self.producers, 0)
        start, posted = time.monotonic(), 0
        try:
            while not self._stop.is_set():
                now = int(time.time() * 1000)
                batch = []
                for n in range(40):
                    e = next(pool).record
                    pid = self.producers[n % len(self.producers)]
                    batch.append({"event_id": e["event_id"], "event_type": e["event_type"], "producer_id": pid,
                                  "seq": seqs[pid], "node_id": e["node_id"], "created_at": now,
                                  "context": e["context"], "properties": e["properties"], "schema_version": 2})
                    seqs[pid] += 1
                self._post(batch)
                self.sent += [Sent(b["event_id"], b["event_type"], b["producer_id"], now,
                                   node_region.get(str(b["node_id"]), "unknown")) for b in batch]
                posted += len(batch)
                time.sleep(max(0.0, start + posted / self.rate - time.monotonic()))
        except BaseException as exc:
            self.errors.append(exc)

    def _post(self, events: list[dict[str, Any]]) -> None:
        body = {"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
                "sdk": {"name": "headwater-bench", "version": "0"}, "events": events}
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.env['HEADWATER_WRITE_KEY']}"}
        req = urllib.request.Request(f"{self.env['GATEWAY_URL'].rstrip('/')}/v1/batch",
                                     data=json.dumps(body).encode(), method="POST", headers=headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            if json.loads(resp.read()).get("rejected"):
                raise RuntimeError("the gateway rejected events")


# (created_at ms, latency ms) of each event found; the created_at of each missing one
Measured = tuple[list[tuple[int, int]], list[int]]


def figures(latencies: list[int], missing: int) -> dict[str, Any]:
    """p50/p99/max in ms over every expected event; a missing event counts as later than any found."""
    total = len(latencies) + missing
    values = sorted(latencies)

    def q(p: float) -> float | None:
        i = min(total - 1, int(p * total)) if total else -1
        return float(values[i]) if 0 <= i < len(values) else None

    return {"events": total, "missing": missing, "p50_ms": q(0.5), "p99_ms": q(0.99),
            "max_ms": float(values[-1]) if values and not missing else None}


def measured_figures(measured: Measured, window: tuple[int, int], sub_ms: int) -> dict[str, Any]:
    """`figures` over the whole window, and when the window holds more than one `sub_ms` slice, the p99 of its
    worst slice (by created_at): a long window gives each pause its true weight, the worst slice shows the pause."""
    found, missing = measured
    out = figures([lat for _, lat in found], len(missing))
    slices = (window[1] - window[0]) // sub_ms
    if slices > 1:
        per: dict[int, tuple[list[int], int]] = {}
        for created, lat in found:
            per.setdefault((created - window[0]) // sub_ms, ([], 0))[0].append(lat)
        for created in missing:
            got = per.setdefault((created - window[0]) // sub_ms, ([], 0))
            per[(created - window[0]) // sub_ms] = (got[0], got[1] + 1)
        worst = max(((i, figures(lats, miss)) for i, (lats, miss) in per.items() if i < slices),
                    key=lambda item: float("inf") if item[1]["p99_ms"] is None else item[1]["p99_ms"])
        out["worst_slice"] = {"seconds": sub_ms / 1000, "starts_at_s": worst[0] * sub_ms / 1000,
                              "p99_ms": worst[1]["p99_ms"], "max_ms": worst[1]["max_ms"]}
    return out


def first_counting(created: dict[Any, list[int]], updates: dict[Any, list[tuple[int, int]]], window: tuple[int, int]
                   ) -> Measured:
    """The events created in `window` (per key: sorted created times of all events sent) with their latency to
    the first update of their key whose count reaches their rank; and those that had none."""
    out: list[tuple[int, int]] = []
    missing: list[int] = []
    for key, times in created.items():
        best: list[tuple[int, int]] = []  # running max of the count over time
        for ts, count in sorted(updates.get(key, [])):
            if not best or count > best[-1][1]:
                best.append((ts, count))
        counts = [c for _, c in best]
        for rank, t in enumerate(sorted(times), start=1):
            if not window[0] <= t < window[1]:
                continue
            i = bisect.bisect_left(counts, rank)
            if i == len(best):
                missing.append(t)
            else:
                out.append((t, best[i][0] - t))
    return out, missing


@dataclass
class Phase:
    """One running pipeline, the sender, and the rules applied in it."""

    pipeline: Running
    sender: Sender
    store: RuleStore
    schemas: WriterSchemas
    drain_s: float
    rules: dict[str, tuple[str, Rule]] = field(default_factory=dict)  # name -> (kind, rule)

    @property
    def cfg(self) -> PipelineConfig:
        return self.pipeline.cfg

    def apply(self, kind: str, env: dict[str, str] | None = None) -> Rule:
        """Apply a rule of `kind` in this process (its warm JVM), or with `env` as `rules apply`'s own process."""
        name = f"bench_{kind}_{uuid.uuid4().hex[:6]}"
        sql = kind_sql(kind, self.sender.producers)
        rule = (apply_rule(self.cfg, sql, name, self.store) if env is None
                else apply_rule_cli(self.cfg, sql, name, self.store, env))
        self.rules[name] = (kind, rule)
        return rule

    def delete_all(self) -> None:
        for name in list(self.rules):
            self.store.delete(name)
            del self.rules[name]

    def first_output(self, rule: Rule, timeout_s: float = 300.0) -> int:
        """Wait for the rule's first output record; its Kafka timestamp (ms). One consumer asks for the end offsets
        (a new consumer every 0.2 s cost this process, which runs the pipeline being measured, CPU and threads)."""
        consumer = Consumer(consumer_config(self.cfg.bootstrap))
        try:
            wait(f"{rule.name}'s first output", lambda: sum(end_offsets(consumer, rule.topic).values()), timeout_s)
        finally:
            consumer.close()
        return min(ts for ts, _ in records(self.cfg, rule.topic, 0))

    def measure(self, seconds: float) -> dict[str, Any]:
        """One measured window: per kind over the rules running, and the built-in 10 s aggregate."""
        now = int(time.time() * 1000)
        w0 = now - now % WINDOW_MS + WINDOW_MS
        time.sleep(max(0.0, (w0 - time.time() * 1000) / 1000))
        batches = self._builtin_batches()
        time.sleep(seconds)
        # A built-in real-time query ending a batch (every HEADWATER_REALTIME_BATCH) holds events back for a moment,
        # and the rules read what `enriched` writes: say when that happened inside the window.
        boundary = self._builtin_batches() != batches
        window = (w0, w0 + int(seconds * 1000))
        time.sleep(self.drain_s)
        if self.sender.errors:
            raise self.sender.errors[0]
        sent = list(self.sender.sent)
        out: dict[str, Any] = {}
        by_kind: dict[str, Measured] = {}
        for _name, (kind, rule) in self.rules.items():
            found, miss = self._rule_latencies(kind, rule, sent, window)
            got = by_kind.setdefault(kind, ([], []))
            by_kind[kind] = (got[0] + found, got[1] + miss)
        for kind, measured in by_kind.items():
            out[kind] = measured_figures(measured, window, SLICE_MS) | {
                "rules": sum(1 for k, _ in self.rules.values() if k == kind)}
        out["builtin_10s_aggregate"] = measured_figures(self._builtin(sent, window), window, SLICE_MS)
        out["builtin_batch_ended_in_window"] = boundary
        log.info("measured %s", out)
        return out

    def _builtin_batches(self) -> dict[str, Any]:
        """The last finished batch of each built-in real-time query (`enriched`, `aggregates_live`)."""
        out: dict[str, Any] = {}
        for name in ("enriched", "aggregates_live"):
            q = self.pipeline.builtin(name)
            progress = q.lastProgress if q is not None else None
            out[name] = progress["batchId"] if progress else None
        return out

    def _rule_latencies(self, kind: str, rule: Rule, sent: list[Sent], window: tuple[int, int]) -> Measured:
        rows = records(self.cfg, rule.topic, window[0], self.schemas)  # what the window's events can have caused
        if kind == "aggregation":
            updates: dict[Any, list[tuple[int, int]]] = defaultdict(list)
            for ts, row in rows:
                key = (int(row["w"]["start"].timestamp() * 1000), row["producer_id"])
                updates[key].append((ts, int(row["events"])))
            created: dict[Any, list[int]] = defaultdict(list)
            for s in sent:
                created[(s.created_ms - s.created_ms % WINDOW_MS, s.producer)].append(s.created_ms)
            return first_counting(created, updates, window)
        first: dict[str, int] = {}
        for ts, row in rows:
            first.setdefault(str(row["event_id"]), ts)
        found: list[tuple[int, int]] = []
        missing: list[int] = []
        for s in sent:
            if not window[0] <= s.created_ms < window[1] or (kind == "filter" and s.event_type == FILTERED_OUT):
                continue
            if s.event_id in first:
                found.append((s.created_ms, first[s.event_id] - s.created_ms))
            else:
                missing.append(s.created_ms)
        return found, missing

    def _builtin(self, sent: list[Sent], window: tuple[int, int]) -> Measured:
        updates: dict[Any, list[tuple[int, int]]] = defaultdict(list)
        for ts, row in records(self.cfg, self.cfg.aggregates_topic, window[0], self.schemas):
            if row["granularity"] == "10s":
                key = (int(row["window_start"].timestamp() * 1000), row["event_type"], row["region"])
                updates[key].append((ts, int(row["events"])))
        created: dict[Any, list[int]] = defaultdict(list)
        for s in sent:
            created[(s.created_ms - s.created_ms % WINDOW_MS, s.event_type, s.region)].append(s.created_ms)
        return first_counting(created, updates, window)


def run(pipeline: Running, env: dict[str, str], store: RuleStore, *, rate: int, seconds: float, warmup: float,
        drain: float, many: int, settle: float, many_seconds: float) -> dict[str, Any]:
    """The latency phase (module doc); the pipeline keeps running (the caller stops it)."""
    sender = Sender(env, pipeline.cfg, rate)
    schemas = WriterSchemas(RegistryClient.of(pipeline.cfg.registry_url, pipeline.cfg.registry_access))
    phase = Phase(pipeline, sender, store, schemas, drain)
    sender.start()
    result: dict[str, Any] = {"rate": rate, "seconds": seconds, "many_seconds": many_seconds}
    try:
        time.sleep(warmup)
        t0 = time.time()
        rule = phase.apply("routing", env)  # as the operator does: `rules apply`, a process with its own JVM
        applied = time.time()
        first = phase.first_output(rule)
        wait("status running", lambda: (s := store.statuses().get(rule.name)) is not None and s.state == "running",
             300)
        result["apply"] = {"apply_s": round(applied - t0, 2), "to_first_output_s": round(first / 1000 - t0, 2),
                           "to_running_status_s": round(time.time() - t0, 2)}
        log.info("apply: %s", result["apply"])
        one: dict[str, Any] = {}
        later: list[float] = []  # apply -> first output of each next rule, applied once the previous was deleted
        for kind in ("routing", *(k for k in KINDS if k != "routing")):  # the routing rule is running
            if kind != "routing":
                phase.delete_all()
                t1 = time.time()
                later.append(round(phase.first_output(phase.apply(kind, env)) / 1000 - t1, 2))
            one[kind] = phase.measure(seconds)
        result["apply"]["next_rules_to_first_output_s"] = later
        result["one_rule"] = {k: v[k] for k, v in one.items()}  # each kind measured alone
        result["one_rule_windows"] = {k: {"builtin_batch_ended_in_window": v["builtin_batch_ended_in_window"]}
                                      for k, v in one.items()}
        # The built-in aggregate in each one-rule window; the figure is the last one's, when the pipeline has run
        # for minutes (the first window can fall into the built-in queries' start, which the job may retry).
        result["builtin_by_window"] = [v["builtin_10s_aggregate"] for v in one.values()]
        result["builtin_at_one_rule"] = result["builtin_by_window"][-1]
        phase.delete_all()
        applied_many = [phase.apply(KINDS[i % len(KINDS)]) for i in range(many)]
        for r in applied_many:
            phase.first_output(r)
        # Steady state, not the transition: each rule joining a pack restarted it, and the queries catch up on
        # what those restarts replayed (minutes on a loaded 2-core host) before the window measures them.
        time.sleep(settle)
        result["tiers"] = sorted(set(pipeline.tiers().get(r.name, "?") for r in applied_many))
        many_figures = phase.measure(many_seconds)
        result["many_rules"] = {"rules": many, **{k: v for k, v in many_figures.items()}}
        return result
    finally:
        sender.stop()
        phase.delete_all()
