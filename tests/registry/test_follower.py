"""A follower registry in a second region, as real processes over real HTTP on the test stack's Kafka: a primary
on its own topic, a follower on a second topic that a copier fills the way MirrorMaker 2 would (same keys, values
and timestamps, read_committed), and what the follower answers, forwards, waits for and never writes."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from common.basic_auth import hash_password
from tests.support.kafka import end_offsets
from tests.support.ports import free_port
from tests.support.processes import log_text, start_service, stop, wait_serving
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
PASSWORDS = {"writer": "w-Secret-pw", "admin": "a-Secret-pw"}
FOLLOW_WAIT_S = 1.5


class Mirror:
    """Stands in for MirrorMaker 2: copies every committed record of `source` to `target` (key, value, timestamp),
    continuously, in a thread; `paused` holds the copy back (mirroring stopped); `copied` counts records written."""

    def __init__(self, bootstrap: str, source: str, target: str) -> None:
        self.target = target
        self.copied = 0
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"mirror-{uuid.uuid4()}",
                                   "enable.auto.commit": False, "isolation.level": "read_committed"})
        self._consumer.assign([TopicPartition(source, 0, OFFSET_BEGINNING)])
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self._thread = threading.Thread(target=self._run, name="mirror", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                continue
            while self.paused.is_set() and not self._stop.is_set():  # a record written once paused waits here
                time.sleep(0.05)
            _, timestamp_ms = msg.timestamp()
            self._producer.produce(self.target, key=msg.key(), value=msg.value(), partition=0, timestamp=timestamp_ms)
            self._producer.flush(10)
            self.copied += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()
        self._producer.flush(10)


@dataclass
class Regions:
    bootstrap: str
    primary_topic: str
    follower_topic: str
    primary: str
    follower: str
    follower_log: Path
    mirror: Mirror
    stop_primary: Any


def basic(name: str, password: str | None = None) -> dict[str, str]:
    token = base64.b64encode(f"{name}:{password or PASSWORDS[name]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def call(url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None,
         ) -> tuple[int, Any, dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": CONTENT_TYPE, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def schema(*fields: str) -> str:
    return json.dumps({"type": "record", "name": "r", "namespace": "follower",
                       "fields": [{"name": f, "type": "long", "default": 0} for f in fields]})


def registry(env: dict[str, str], folder: Path, name: str) -> tuple[str, Any, Path]:
    port = free_port()
    log = folder / f"{name}.log"
    with open(log, "wb") as out:
        proc = start_service("registry", {**os.environ, "REGISTRY_PORT": str(port), "REGISTRY_HOST": "127.0.0.1",
                                          **env}, out)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_serving(f"{url}/ready", proc, 60, log=log, interval_s=0.2)
    except BaseException:
        stop(proc, 15)
        raise
    return url, proc, log


@pytest.fixture(scope="module")
def regions(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Regions]:
    folder = tmp_path_factory.mktemp("regions")
    bootstrap = stack_env["KAFKA_BOOTSTRAP"]
    run = uuid.uuid4().hex[:8]
    primary_topic, follower_topic = f"_schemas_{run}", f"a._schemas_{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    compacted = {"cleanup.policy": "compact", "retention.ms": "-1"}
    for fut in admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1, config=compacted)
                                    for t in (primary_topic, follower_topic)]).values():
        fut.result(30)
    users = folder / "users"
    users.write_text(f"writer:write:{hash_password(PASSWORDS['writer'], iterations=1000)}\n"
                     f"admin:admin:{hash_password(PASSWORDS['admin'], iterations=1000)}\n")
    primary, primary_proc, _ = registry({"KAFKA_BOOTSTRAP": bootstrap, "SCHEMAS_TOPIC": primary_topic,
                                         "REGISTRY_USERS_FILE": str(users)}, folder, "primary")
    mirror = Mirror(bootstrap, primary_topic, follower_topic)
    try:
        follower, follower_proc, follower_log = registry(
            {"KAFKA_BOOTSTRAP": bootstrap, "SCHEMAS_TOPIC": follower_topic, "REGISTRY_PRIMARY_URL": primary,
             "REGISTRY_FORWARD_TIMEOUT_S": "5", "REGISTRY_FOLLOW_WAIT_S": str(FOLLOW_WAIT_S)}, folder, "follower")
        try:
            yield Regions(bootstrap, primary_topic, follower_topic, primary, follower, follower_log, mirror,
                          lambda: stop(primary_proc, 15))
        finally:
            stop(follower_proc, 15)
    finally:
        mirror.close()
        stop(primary_proc, 15)


def test_the_follower_says_what_it_is(regions: Regions) -> None:
    assert call(regions.follower + "/mode")[:2] == (200, {"mode": "READONLY"})
    assert call(regions.primary + "/mode")[:2] == (200, {"mode": "READWRITE"})
    status, ready, _ = call(regions.follower + "/ready")
    assert status == 200 and ready["role"] == "follower" and ready["primary"] == regions.primary
    assert call(regions.primary + "/ready")[1]["role"] == "primary"


def test_a_registration_through_the_follower_lands_in_the_primary_and_reads_back_at_once(regions: Regions) -> None:
    subject = f"test.{uuid.uuid4().hex}.follower"
    status, body, _ = call(f"{regions.follower}/subjects/{subject}/versions", "POST", {"schema": schema("a")},
                           basic("writer"))
    assert status == 200, body
    sid = body["id"]
    # The primary holds it (one id everywhere), and the follower answered only once the mirror had delivered it:
    # a read right after the write finds it, with no waiting here.
    assert call(f"{regions.follower}/schemas/ids/{sid}")[:2] == (200, {"schema": schema("a")})
    assert call(f"{regions.follower}/subjects/{subject}/versions/latest")[1]["id"] == sid
    assert call(f"{regions.primary}/subjects/{subject}/versions/latest")[1]["id"] == sid
    # Registering again through the follower is the same id (idempotent, as on the primary).
    assert call(f"{regions.follower}/subjects/{subject}/versions", "POST", {"schema": schema("a")},
                basic("writer"))[:2] == (200, {"id": sid})
    # Lookup and compatibility checks are reads: answered by the follower itself.
    status, found, _ = call(f"{regions.follower}/subjects/{subject}", "POST", {"schema": schema("a")})
    assert (status, found["id"], found["version"]) == (200, sid, 1)


def test_the_callers_authorization_is_what_the_primary_checks(regions: Regions) -> None:
    subject = f"test.{uuid.uuid4().hex}.auth"
    url = f"{regions.follower}/subjects/{subject}/versions"
    status, body, headers = call(url, "POST", {"schema": schema("a")})
    assert (status, body["error_code"]) == (401, 401)  # the primary's answer, its challenge passed on
    assert headers["WWW-Authenticate"].startswith("Basic ")
    assert call(url, "POST", {"schema": schema("a")}, basic("writer", "wrong-pw"))[1]["error_code"] == 401
    status, body, _ = call(url, "POST", {"schema": schema("a")}, basic("writer"))
    assert status == 200 and isinstance(body["id"], int)
    # Deletions and compatibility settings are forwarded too, with the role the primary requires.
    assert call(f"{regions.follower}/config/{subject}", "PUT", {"compatibility": "FULL"},
                basic("writer"))[1]["error_code"] == 40301
    assert call(f"{regions.follower}/config/{subject}", "PUT", {"compatibility": "FULL"},
                basic("admin"))[:2] == (200, {"compatibility": "FULL"})
    assert call(f"{regions.primary}/config/{subject}")[1] == {"compatibilityLevel": "FULL"}
    wait_for("the level mirrored to the follower",
             lambda: call(f"{regions.follower}/config/{subject}")[1] == {"compatibilityLevel": "FULL"}, 10)
    assert call(f"{regions.follower}/subjects/{subject}/versions/1", "DELETE", None,
                basic("admin"))[:2] == (200, 1)
    assert call(f"{regions.primary}/subjects/{subject}/versions")[:2] == (200, [])  # soft deleted there
    # The credentials never reach the follower's log.
    text = log_text(regions.follower_log)
    for name, password in PASSWORDS.items():
        assert password not in text and basic(name)["Authorization"].split()[1] not in text


def test_a_registration_the_mirror_has_not_delivered_is_answered_after_the_wait(regions: Regions) -> None:
    subject = f"test.{uuid.uuid4().hex}.lag"
    regions.mirror.paused.set()
    try:
        started = time.monotonic()
        status, body, _ = call(f"{regions.follower}/subjects/{subject}/versions", "POST", {"schema": schema("b")},
                               basic("writer"))
        waited = time.monotonic() - started
        assert status == 200, body
        assert waited >= FOLLOW_WAIT_S - 0.1
        assert call(f"{regions.primary}/schemas/ids/{body['id']}")[0] == 200
        assert call(f"{regions.follower}/schemas/ids/{body['id']}")[1]["error_code"] == 40403
        wait_for("the warning in the follower's log",
                 lambda: "has not arrived through the mirror" in log_text(regions.follower_log), 5)
    finally:
        regions.mirror.paused.clear()
    wait_for("the id mirrored to the follower", lambda: call(f"{regions.follower}/schemas/ids/{body['id']}")[0] == 200,
             10)


def test_confluents_own_client_registers_through_the_follower_and_reads_back_from_it(regions: Regions) -> None:
    subject = f"test.{uuid.uuid4().hex}.confluent"
    client = SchemaRegistryClient({"url": regions.follower, "basic.auth.user.info": f"writer:{PASSWORDS['writer']}"})
    sid = client.register_schema(subject, Schema(schema("e"), "AVRO"))
    fresh = SchemaRegistryClient({"url": regions.follower})  # no cache: asks the follower itself
    assert json.loads(fresh.get_schema(sid).schema_str or "null") == json.loads(schema("e"))
    assert fresh.get_latest_version(subject).schema_id == sid
    assert call(f"{regions.primary}/schemas/ids/{sid}")[0] == 200


def test_a_write_forwarded_by_another_follower_is_refused(regions: Regions) -> None:
    status, body, _ = call(f"{regions.follower}/subjects/loop/versions", "POST", {"schema": schema("a")},
                           {"X-Headwater-Forwarded-By": "follower"})
    assert (status, body["error_code"]) == (503, 50302)
    assert "REGISTRY_PRIMARY_URL" in body["message"]


def test_the_follower_never_writes_to_its_topic(regions: Regions) -> None:
    wait_for("the mirror caught up", lambda: regions.mirror.copied > 0 and end_offsets(
        regions.bootstrap, regions.follower_topic)[0] == regions.mirror.copied, 10)
    # Every record of the follower's topic is one the mirror copied: none of the follower's own.
    assert end_offsets(regions.bootstrap, regions.follower_topic) == {0: regions.mirror.copied}
    assert "became the _schemas writer" not in log_text(regions.follower_log)


def test_with_the_primary_down_writes_get_503_naming_it_and_reads_keep_working(regions: Regions) -> None:
    subject = f"test.{uuid.uuid4().hex}.down"
    status, body, _ = call(f"{regions.follower}/subjects/{subject}/versions", "POST", {"schema": schema("c")},
                           basic("writer"))
    assert status == 200
    sid = body["id"]
    regions.stop_primary()
    status, body, _ = call(f"{regions.follower}/subjects/{subject}/versions", "POST", {"schema": schema("c", "d")},
                           basic("writer"))
    assert (status, body["error_code"]) == (503, 50301)
    assert regions.primary in body["message"] and "primary region" in body["message"]
    assert call(f"{regions.follower}/config", "PUT", {"compatibility": "NONE"},
                basic("admin"))[1]["error_code"] == 50301
    assert call(f"{regions.follower}/schemas/ids/{sid}")[:2] == (200, {"schema": schema("c")})
    assert subject in call(f"{regions.follower}/subjects")[1]
    assert call(regions.follower + "/ready")[0] == 200
    assert "the primary registry cannot be reached" in log_text(regions.follower_log)


def test_a_follower_whose_mirrored_topic_does_not_exist_yet_exits_saying_who_creates_it(
        stack_env: dict[str, str], tmp_path: Path) -> None:
    topic = f"a._schemas_missing_{uuid.uuid4().hex[:8]}"
    log = tmp_path / "follower.log"
    with open(log, "wb") as out:
        proc = start_service("registry", {**os.environ, "KAFKA_BOOTSTRAP": stack_env["KAFKA_BOOTSTRAP"],
                                          "SCHEMAS_TOPIC": topic, "REGISTRY_PORT": str(free_port()),
                                          "REGISTRY_PRIMARY_URL": "http://127.0.0.1:9"}, out)
    try:
        assert proc.wait(60) != 0
    finally:
        stop(proc, 5)
    assert f"topic '{topic}' does not exist" in log_text(log)
    assert "MirrorMaker 2 creates it when it first mirrors the primary's topic" in log_text(log)
