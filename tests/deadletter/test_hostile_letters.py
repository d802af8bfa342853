"""Poisoned records in the dead-letter topic against the CLI, on the real broker: anyone who reaches Kafka can
write there, and a write-key holder chooses much of what a genuine dead letter holds.

Each test writes its own dead-letter topic (the gateway's own `dead_letter()` builds the genuine records) and
runs `python -m deadletter` on it as an operator would."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from gateway.records import Headers, KafkaRecord, Rejection, RequestMeta, SchemaRef, dead_letter
from stack.config import REPO_ROOT
from tests.deadletter.fakes import page_view
from tests.deadletter.incident import cli_env, last_json
from tests.support.kafka import consume_all, end_offsets

pytestmark = pytest.mark.integration
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31m\x9b1;1H\u202eevil"
UNSAFE = ("\x1b", "\x07", "\x9b", "\u202e")


def new_topic(env: dict[str, str], prefix: str) -> str:
    name = f"{prefix}.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": env["KAFKA_BOOTSTRAP"]})
    for fut in admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)]).values():
        fut.result(30)
    return name


def letter(event: dict[str, Any], *, source: str = "dev", received_at: int | None = None,
           user_agent: str = "incident-test/1", reason: str = "unknown_schema_version",
           message: str = "subject headwater.events.page_view has no version 3") -> KafkaRecord:
    """A dead letter exactly as the gateway writes one for `event` (a JSON page_view)."""
    meta = RequestMeta.make(str(uuid.uuid4()), received_at or int(time.time() * 1000), source, "127.0.0.1",
                            user_agent)
    return dead_letter("-", meta, Rejection(0, reason, message), json.dumps(event).encode(), is_json=True,
                       schema=SchemaRef("headwater.events.page_view", 3, None), key=event["node_id"],
                       event_id=event["event_id"], event_type=event["event_type"], producer_id=event["producer_id"])


def write(env: dict[str, str], topic: str, records: list[tuple[bytes | None, bytes, Any]]) -> None:
    """Straight to Kafka, as anyone who reaches the broker can (compressed: a 3 MB header fits the broker)."""
    producer = Producer({"bootstrap.servers": env["KAFKA_BOOTSTRAP"], "compression.type": "zstd",
                         "message.max.bytes": 10 << 20})
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=list(headers))
    assert producer.flush(30) == 0


def as_written(record: KafkaRecord, *, extra: Headers | None = None) -> tuple[bytes, bytes, Headers]:
    return record.key, record.value, [*record.headers, *(extra or [])]


def run(env: dict[str, str], topic: str, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deadletter", "--env-file", env["ENV_FILE"], *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=180, check=False,
                          env={**cli_env(), "DEADLETTER_TOPIC": topic, **settings})


def headers_of(record: Message) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    raw = record.headers()
    for k, v in raw if isinstance(raw, list) else []:
        out.setdefault(k, []).append(v if isinstance(v, bytes) else b"")
    return out


def replayed(env: dict[str, str], topic: str, run_name: str, start: dict[int, int] | None = None) -> list[Message]:
    return [r for r in consume_all(env["KAFKA_BOOTSTRAP"], topic, start=start)
            if headers_of(r).get("replay_run") == [run_name.encode()]]


def test_a_record_too_large_to_replay_is_reported_and_the_run_goes_on(incident_env: dict[str, str]) -> None:
    """D1: a 3 MB header stopped every replay run at that dead letter (MSG_SIZE_TOO_LARGE)."""
    env, marker = incident_env, uuid.uuid4().hex[:8]
    dl, out = new_topic(env, "test.dl"), new_topic(env, "test.replayed")
    huge, fine, junk = (page_view(i, marker) for i in range(3))
    write(env, dl, [as_written(letter(huge, user_agent="incident-test/1 " + "a" * (3 << 20))), as_written(letter(fine)),
                    as_written(letter(junk), extra=[("x-junk", b"j" * (3 << 20))])])
    settings = {"HEADWATER_GATEWAY_TOPIC_OVERRIDES": f"page_view={out}"}
    first = run(env, dl, "replay", "--run", f"d1-{marker}", **settings)
    assert first.returncode == 0, first.stdout + first.stderr
    report = last_json(first.stdout)
    assert report["still_invalid"] == {"record_too_large": 1} and report["replayed"] == 2, first.stdout
    assert "still invalid 0:0" in first.stdout
    again = run(env, dl, "replay", "--run", f"d1-{marker}", **settings)  # the next run is not stuck at it either
    assert again.returncode == 0 and last_json(again.stdout)["scanned"] == 0, again.stdout + again.stderr
    got = replayed(env, out, f"d1-{marker}")
    assert sorted(headers_of(r)["event_id"][0].decode() for r in got) == sorted([fine["event_id"], junk["event_id"]])


def test_out_of_range_received_at_is_listed_and_summarised(incident_env: dict[str, str]) -> None:
    """D2: received_at = 10**30 crashed `list` and `summary`."""
    env, marker = incident_env, uuid.uuid4().hex[:8]
    dl = new_topic(env, "test.dl")
    write(env, dl, [as_written(letter(page_view(0, marker), received_at=10**30)),
                    as_written(letter(page_view(1, marker), received_at=-(10**18)))])
    listed = run(env, dl, "list")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 4 and listed.stdout.count("out of range") == 2, listed.stdout
    summary = run(env, dl, "summary")
    assert summary.returncode == 0 and "out of range" in summary.stdout, summary.stderr
    as_json = run(env, dl, "summary", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout.splitlines()[0])["count"] == 2, as_json.stderr
    assert "Traceback" not in listed.stderr + summary.stderr + as_json.stderr


def test_replay_carries_no_forged_source_or_provenance(incident_env: dict[str, str]) -> None:
    """D3: replay copied the dead letter's other headers (replay provenance included) onto the event, and took a
    source that the dead letter's own headers contradict."""
    env, marker = incident_env, uuid.uuid4().hex[:8]
    dl, out = new_topic(env, "test.dl"), new_topic(env, "test.replayed")
    forged_provenance = letter(page_view(0, marker))
    forged_source = letter(page_view(1, marker))
    value = json.loads(forged_source.value)
    value["source"] = "admin"  # the value says admin, the gateway's header says dev
    genuine = page_view(2, marker)
    write(env, dl, [
        as_written(forged_provenance, extra=[("replayed_from", b"headwater.deadletter:0:1"),
                                             ("replay_run", b"trusted-run")]),
        (forged_source.key, json.dumps(value).encode(), forged_source.headers),
        as_written(letter(genuine), extra=[("x-forged", b"1"), ("source", b"admin")]),
    ])
    done = run(env, dl, "replay", "--run", f"d3-{marker}", HEADWATER_GATEWAY_TOPIC_OVERRIDES=f"page_view={out}")
    assert done.returncode == 0, done.stdout + done.stderr
    report = last_json(done.stdout)
    assert report["still_invalid"] == {"forged_dead_letter": 3} and report["replayed"] == 0, done.stdout
    honest = page_view(3, marker)
    write(env, dl, [as_written(letter(honest), extra=[("x-forged", b"1")])])
    done = run(env, dl, "replay", "--run", f"d3-{marker}", HEADWATER_GATEWAY_TOPIC_OVERRIDES=f"page_view={out}")
    assert last_json(done.stdout)["replayed"] == 1, done.stdout + done.stderr
    [event] = replayed(env, out, f"d3-{marker}")
    headers = headers_of(event)
    assert set(headers) == {"event_id", "producer_id", "batch_id", "received_at", "client_ip", "user_agent",
                            "source", "replayed_from", "replayed_at", "replay_run"}
    assert all(len(v) == 1 for v in headers.values()) and headers["source"] == [b"dev"]
    assert headers["replayed_from"] == [f"{dl}:0:3".encode()]


def test_replay_writes_where_the_gateway_routes_the_event_type(incident_env: dict[str, str]) -> None:
    """D4: replay wrote every event to headwater.events whatever the gateway's topic overrides said."""
    env, marker = incident_env, uuid.uuid4().hex[:8]
    dl, routed = new_topic(env, "test.dl"), new_topic(env, "test.routed")
    event = page_view(0, marker)
    write(env, dl, [as_written(letter(event))])
    events_start = end_offsets(env["KAFKA_BOOTSTRAP"], "headwater.events")
    done = run(env, dl, "replay", "--run", f"d4-{marker}",
               HEADWATER_GATEWAY_TOPIC_OVERRIDES=f"purchase=elsewhere,page_view={routed}")
    assert done.returncode == 0 and last_json(done.stdout)["replayed"] == 1, done.stdout + done.stderr
    [record] = replayed(env, routed, f"d4-{marker}")
    assert headers_of(record)["event_id"] == [event["event_id"].encode()]
    assert replayed(env, "headwater.events", f"d4-{marker}", start=events_start) == []
    bad = run(env, dl, "replay", "--run", f"d4b-{marker}", HEADWATER_GATEWAY_TOPIC_OVERRIDES="page_view")
    assert bad.returncode == 2 and "HEADWATER_GATEWAY_TOPIC_OVERRIDES" in bad.stderr, bad.stderr


def test_show_of_a_record_that_is_not_a_dead_letter_says_so(incident_env: dict[str, str]) -> None:
    """D5: `show` of such a record printed a traceback."""
    env = incident_env
    dl = new_topic(env, "test.dl")
    write(env, dl, [(None, b"not a dead letter", []), (None, b'{"reason": 1}', [])])
    for position in ("0:0", "0:1"):
        shown = run(env, dl, "show", position)
        assert shown.returncode == 1, shown.stdout + shown.stderr
        assert "is not a dead letter" in shown.stderr and "Traceback" not in shown.stderr, shown.stderr
    missing = run(env, dl, "show", "0:2")
    assert missing.returncode == 1 and "no record at" in missing.stderr, missing.stderr


def test_what_a_write_key_holder_sent_cannot_drive_the_terminal(incident_env: dict[str, str]) -> None:
    """T1: escape sequences in a dead letter reached the operator's terminal through `summary` and `list`."""
    env, marker = incident_env, uuid.uuid4().hex[:8]
    dl = new_topic(env, "test.dl")
    event = page_view(0, marker, event_type="page_view" + ESCAPES)
    record = letter(event, reason="unknown_event_type" + ESCAPES, message="no such type " + ESCAPES,
                    source="dev" + ESCAPES, user_agent=ESCAPES)
    write(env, dl, [as_written(record)])
    outputs = [run(env, dl, *args) for args in (("summary",), ("list",), ("summary", "--json"), ("show", "0:0"))]
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout + done.stderr for c in UNSAFE), repr(done.stdout)
    assert "\\x1b]0;owned" in outputs[0].stdout and "\\u202eevil" in outputs[1].stdout
    assert json.loads(outputs[3].stdout)["event_type"].startswith("page_view\x1b]0;owned")  # still valid JSON
