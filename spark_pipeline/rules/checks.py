"""`rules apply`'s analysis done by the running pipeline's warm JVM, asked and answered over two Kafka topics.

A `rules apply` process that analyses a rule itself starts a JVM and builds the live views: 3 s on an idle 2-core
host, 6-10 s on one whose pipeline runs real-time queries at 1,000 events/s. The running pipeline has a warm JVM
and builds the same views (views.py) in a few hundred milliseconds. So the command asks it:

- `rules apply` writes a request (key = a random id; JSON: the rule's name, its SQL, when it was sent) to
  CHECKS_TOPIC and waits for the reply of that id in CHECKED_TOPIC: the analysis (output schema as Spark's JSON,
  key columns, aggregation, output mode) or the refusal (code, line, message), exactly what the analysis in the
  command itself gives (`cli.live_views` + `analyse.analyse`, here in a session of their own over the current
  registry and rules). The command then registers the output schema, creates the topic and stores the rule as
  before, as its own principal.
- The pipeline (`CheckService`, a thread beside the rule manager) reads only requests written after it started,
  answers one at a time, skips requests older than REQUEST_MAX_AGE_S or larger than the SQL limit (bounded like
  every rule by the gate), and writes a heartbeat (key HEARTBEAT_KEY) to CHECKED_TOPIC every HEARTBEAT_S.
- The command asks only when the newest heartbeat is younger than ALIVE_S (a running pipeline), waits at most
  HEADWATER_RULES_CHECK_WAIT_S (default 30 s) for the reply, and otherwise analyses in its own JVM as before.

Both topics have one partition, delete retention of an hour, and are created by whoever comes first. With the
secure profile, only the `rules` principal may write requests and only the `pipeline` principal replies
(stack/kafka_acls.py). A reply is trusted as far as its writer: the pipeline analyses every stored rule again
before it runs it.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pyspark.sql.types import StructType

from common.kafka_security import KafkaSecurity
from spark_pipeline.rules import model
from spark_pipeline.rules.model import CHECKED_TOPIC, CHECKS_TOPIC, RuleError
from spark_pipeline.rules.store import StoreError, Topics, TopicSpec, _client

log = logging.getLogger("spark_pipeline.rules")
CHECK_TOPICS = {t: TopicSpec(1, {"cleanup.policy": "delete", "retention.ms": str(3_600_000)})
                for t in (CHECKS_TOPIC, CHECKED_TOPIC)}
HEARTBEAT_KEY = "_heartbeat"
HEARTBEAT_S = 5.0
ALIVE_S = 15.0  # a heartbeat younger than this: a pipeline is answering
REQUEST_MAX_AGE_S = 60.0  # older requests are skipped (the command gave up on them)
MAX_REQUEST_BYTES = model.MAX_SQL_BYTES + 4096
DEFAULT_WAIT_S = 30.0
WARM_UP = ("headwater_warm_up", "SELECT event_id, event_type FROM events WHERE event_type = 'page_view'")


@dataclass(frozen=True)
class Checked:
    """The analysis of a rule as the command stores it (`analyse.Analysis` without the DataFrame)."""

    schema: StructType
    key_columns: tuple[str, ...]
    aggregation: bool
    output_mode: str


def ensure_topics(bootstrap: str, security: KafkaSecurity | None = None, timeout_s: float = 30.0) -> None:
    """Create CHECKS_TOPIC and CHECKED_TOPIC if missing and wait for their leaders."""
    Topics(bootstrap, security, timeout_s).ensure(CHECK_TOPICS)


def encode_request(request_id: str, name: str, sql: str, sent_ms: int) -> bytes:
    return json.dumps({"id": request_id, "name": name, "sql": sql, "sent_at": sent_ms}).encode()


def decode_request(raw: bytes, now_ms: int) -> tuple[str, str, str] | None:
    """(id, name, sql) of a request to answer; None for one to skip (malformed, too large, too old)."""
    if len(raw) > MAX_REQUEST_BYTES:
        return None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict):
        return None
    rid, name, sql, sent = body.get("id"), body.get("name"), body.get("sql"), body.get("sent_at")
    if not (isinstance(rid, str) and 0 < len(rid) <= 64 and isinstance(name, str) and len(name) <= 256
            and isinstance(sql, str) and isinstance(sent, int) and not isinstance(sent, bool)):
        return None
    if now_ms - sent > REQUEST_MAX_AGE_S * 1000:
        return None
    return rid, name, sql


def encode_reply(request_id: str, result: Checked | RuleError) -> bytes:
    if isinstance(result, RuleError):
        body: dict[str, Any] = {"id": request_id, "ok": False, "code": result.code, "line": result.line,
                                "message": result.message}
    else:
        body = {"id": request_id, "ok": True, "schema": result.schema.jsonValue(),
                "key_columns": list(result.key_columns), "aggregation": result.aggregation,
                "output_mode": result.output_mode}
    return json.dumps(body).encode()


def decode_reply(raw: bytes) -> Checked | RuleError:
    """The analysis or the refusal a reply carries; ValueError if it is not a reply."""
    body = json.loads(raw)
    if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
        raise ValueError("not a rule check reply")
    if not body["ok"]:
        code, line, message = body.get("code"), body.get("line"), body.get("message")
        if not (isinstance(code, str) and isinstance(message, str) and (line is None or isinstance(line, int))):
            raise ValueError("a refusal without code, line and message")
        return RuleError(code[:64], line, message[:4000])
    keys, aggregation, mode = body.get("key_columns"), body.get("aggregation"), body.get("output_mode")
    if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys) and isinstance(aggregation, bool)
            and mode in ("append", "update", "complete")):
        raise ValueError("an analysis without key columns, aggregation and output mode")
    return Checked(StructType.fromJson(body["schema"]), tuple(keys), aggregation, str(mode))


def _heartbeat_age_s(consumer: Consumer, now_ms: int) -> float | None:
    """Seconds since the newest heartbeat written in the last ALIVE_S (the records from that time on, found by
    timestamp: however many replies were written meanwhile); None: none in that time."""
    since = consumer.offsets_for_times([TopicPartition(CHECKED_TOPIC, 0, now_ms - int(ALIVE_S * 1000))],
                                       timeout=5)[0].offset
    _, high = consumer.get_watermark_offsets(TopicPartition(CHECKED_TOPIC, 0), timeout=5)
    if since < 0 or since >= high:
        return None
    consumer.assign([TopicPartition(CHECKED_TOPIC, 0, since)])
    newest = None
    deadline = time.monotonic() + 5
    position = since
    while position < high and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        position = (msg.offset() or position) + 1
        if msg.key() == HEARTBEAT_KEY.encode():
            newest = msg.timestamp()[1]
    return None if newest is None else (now_ms - newest) / 1000


def ask(bootstrap: str, name: str, sql: str, security: KafkaSecurity | None = None,
        wait_s: float = DEFAULT_WAIT_S, *, topics: Topics | None = None,
        producer: Producer | None = None) -> Checked | RuleError | None:
    """The running pipeline's analysis of rule `name` (or its refusal); None when no pipeline is answering (no
    topic of answers, no recent heartbeat, or no reply within `wait_s`): the caller analyses it itself. `topics`
    and `producer` (acks=all): the caller's, when it has them (each new client costs round trips)."""
    topics = topics or Topics(bootstrap, security)
    if not topics.exists(CHECKED_TOPIC):
        log.info("no pipeline has answered rule checks on this cluster (no topic %s): analysing here", CHECKED_TOPIC)
        return None
    consumer = Consumer(_client(bootstrap, security, **{"group.id": "headwater-rules-check",
                                                        "enable.auto.commit": False, "fetch.wait.max.ms": 50}))
    try:
        age = _heartbeat_age_s(consumer, int(time.time() * 1000))
        if age is None or age > ALIVE_S:
            log.info("no running pipeline answers rule checks (%s): analysing here",
                     "no heartbeat" if age is None else f"its last heartbeat {age:.0f} s ago")
            return None
        _, high = consumer.get_watermark_offsets(TopicPartition(CHECKED_TOPIC, 0), timeout=5)
        consumer.assign([TopicPartition(CHECKED_TOPIC, 0, high)])
        request_id = uuid.uuid4().hex
        producer = producer or Producer(_client(bootstrap, security, **{"linger.ms": 0, "acks": "all"}))
        producer.produce(CHECKS_TOPIC, key=request_id.encode(),
                         value=encode_request(request_id, name, sql, int(time.time() * 1000)))
        if producer.flush(10) != 0:
            raise StoreError(f"could not write the rule check request to {CHECKS_TOPIC}")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            msg = consumer.poll(min(0.5, max(0.01, deadline - time.monotonic())))
            value = None if msg is None or msg.error() or msg.key() != request_id.encode() else msg.value()
            if value is None:
                continue
            try:
                return decode_reply(value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("a malformed rule check reply (%s): analysing here", exc)
                return None
        log.warning("the running pipeline did not answer the rule check within %.0f s: analysing here", wait_s)
        return None
    except KafkaException as exc:
        log.warning("rule check over Kafka failed (%s): analysing here", exc)
        return None
    finally:
        consumer.close()


Analyser = Callable[[str, str], Checked]  # (name, sql) -> the analysis; raises RuleError when refused


class CheckService:
    """The pipeline's side: answers the rule checks written after it started, one at a time, with `analyser`;
    writes a heartbeat every HEARTBEAT_S. `start()` runs it in a daemon thread; `stop()` ends it."""

    def __init__(self, bootstrap: str, analyser: Analyser, security: KafkaSecurity | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._bootstrap, self._security = bootstrap, security
        self._analyser = analyser
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.answered = 0

    def start(self) -> None:
        ensure_topics(self._bootstrap, self._security)
        self._consumer = Consumer(_client(self._bootstrap, self._security, **{
            "group.id": "headwater-rules-check-service", "enable.auto.commit": False, "fetch.wait.max.ms": 100}))
        # The end offset now, not OFFSET_END (resolved at the first fetch): a request written meanwhile is answered.
        _, high = self._consumer.get_watermark_offsets(TopicPartition(CHECKS_TOPIC, 0), timeout=10)
        self._consumer.assign([TopicPartition(CHECKS_TOPIC, 0, high)])
        self._producer = Producer(_client(self._bootstrap, self._security, **{"linger.ms": 0, "acks": "all"}))
        self._heartbeat()
        self._thread = threading.Thread(target=self._run, name="headwater-rule-checks", daemon=True)
        self._thread.start()
        log.info("rule checks: answering `rules apply` on %s", CHECKS_TOPIC)

    def _heartbeat(self) -> None:
        self._producer.produce(CHECKED_TOPIC, key=HEARTBEAT_KEY.encode(), value=b"{}")
        self._producer.poll(0)
        self._next_heartbeat = time.monotonic() + HEARTBEAT_S

    def _run(self) -> None:
        # One analysis before the first request: the first in a JVM builds the views' plans cold (1.2 s on a loaded
        # 2-core host, against 0.4-0.6 s after).
        try:
            self._analyser(WARM_UP[0], WARM_UP[1])
        except Exception as exc:
            log.debug("rule checks: the warm-up analysis failed: %s", exc)
        while not self._stop.is_set():
            try:
                if time.monotonic() >= self._next_heartbeat:
                    self._heartbeat()
                msg = self._consumer.poll(0.5)
                value = None if msg is None or msg.error() else msg.value()
                if value is not None:
                    self.handle(value)
            except Exception:  # one bad request or a broker hiccup never ends the service
                log.exception("rule checks: a request failed")
                time.sleep(0.5)

    def handle(self, raw: bytes) -> bool:
        """Answer one request; whether it was answered (skipped: malformed, too large, too old)."""
        request = decode_request(raw, int(self._clock() * 1000))
        if request is None:
            log.warning("rule checks: skipped a request (malformed, over %d bytes, or older than %.0f s)",
                        MAX_REQUEST_BYTES, REQUEST_MAX_AGE_S)
            return False
        rid, name, sql = request
        began = time.monotonic()
        result: Checked | RuleError
        try:
            result = self._analyser(name, sql)
        except RuleError as exc:
            result = exc
        self._producer.produce(CHECKED_TOPIC, key=rid.encode(), value=encode_reply(rid, result))
        self._producer.flush(10)
        self.answered += 1
        log.info("rule checks: %s %s in %.2f s", name[:64],
                 "refused" if isinstance(result, RuleError) else "analysed", time.monotonic() - began)
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._consumer.close()
            self._producer.flush(5)

