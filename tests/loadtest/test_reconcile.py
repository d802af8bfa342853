"""Unit tests of the reconciliation: counts, the run records it reads, and the identity read from Avro bytes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pytest

from loadtest.events import EventFactory
from loadtest.kafka_scan import Found, _has_prefix, read_prefix
from loadtest.reconcile import Tally, reconcile
from loadtest.runlog import AckLog, Manifest, read_acks
from schemas.catalog import load_catalog

pytestmark = pytest.mark.unit


def _found(pid: str, seq: int, eid: str, header: str | None = None) -> Found:
    return Found(pid, seq, eid, eid if header is None else header, 1000)


def test_every_acknowledged_event_found() -> None:
    tally = Tally()
    for seq in range(3):
        tally.ack("p", seq, f"e{seq}")
        tally.stored(_found("p", seq, f"e{seq}"))
    tally.stored(_found("p", 3, "e3"))  # in flight when the run stopped: stored, never acknowledged
    report = tally.report()
    assert (report.acknowledged, report.found, report.missing, report.duplicates) == (3, 3, 0, 0)
    assert report.unacknowledged_found == 1 and report.records_scanned == 4 and report.ok
    assert report.mean_value_bytes == 1000 and report.producers_acknowledged == 1 and report.seq_gaps == 0


def test_missing_and_duplicates_are_counted() -> None:
    tally = Tally()
    for seq in range(4):
        tally.ack("p", seq, f"e{seq}")
    tally.stored(_found("p", 0, "e0"))
    tally.stored(_found("p", 0, "e0"))  # a retry whose answer was lost
    tally.stored(_found("p", 2, "e2"))
    report = tally.report()
    assert (report.found, report.missing, report.duplicates, report.id_mismatches) == (2, 2, 1, 0)
    assert report.seq_gaps == 1  # seq 1 is absent below the highest stored seq 2
    assert not report.ok


def test_an_event_stored_under_another_id_fails() -> None:
    tally = Tally()
    tally.ack("p", 0, "e0")
    tally.stored(_found("p", 0, "other"))
    assert tally.report().id_mismatches == 1 and not tally.report().ok
    header = Tally()
    header.stored(_found("p", 0, "e0", header="e9"))
    assert header.report().id_mismatches == 1


def test_ack_log_round_trip_across_processes(tmp_path: Path) -> None:
    first, second = AckLog(tmp_path, 0, flush_every=2), AckLog(tmp_path, 1)
    first.record("p1", [(0, "a"), (1, "b"), (2, "c")])
    second.record("p2", [(0, "d")])
    first.close()
    second.close()
    assert sorted(read_acks(tmp_path)) == [("p1", 0, "a"), ("p1", 1, "b"), ("p1", 2, "c"), ("p2", 0, "d")]
    assert first.count == 3


def test_reconcile_reads_the_run_folder(tmp_path: Path) -> None:
    Manifest(run_id="11111111-1111-4111-8111-111111111111", started_at_ms=1, nodes=2, rate=1.0, batch_events=2,
             users=1, workers=1, duration_s=1.0, shape="soak", gateway_url="http://x").write(tmp_path)
    log = AckLog(tmp_path, 0)
    log.record("p", [(0, "e0"), (1, "e1")])
    log.close()
    report = reconcile(tmp_path, {}, found=[_found("p", 0, "e0")])
    assert (report.acknowledged, report.found, report.missing) == (2, 1, 1)
    assert Manifest.read(tmp_path).nodes == 2


@pytest.mark.parametrize("event_type", ["page_view", "purchase", "server_metric"])
def test_identity_prefix_read_matches_a_full_decode(event_type: str) -> None:
    et = load_catalog().event_types[event_type]
    schema = et.schema(et.latest_version)
    assert _has_prefix(schema) and not _has_prefix({"fields": list(reversed(schema["fields"]))})
    event = EventFactory(seed=1).event("5b7b2d0e-3f3a-4c59-9f61-3f1f3a0c9e4d", "n", 2**40 + 7, 1_795_313_484_990,
                                       event_type)
    record = {**event, "sent_at": 1, "received_at": None, "sdk_name": "s", "sdk_version": "v"}
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(json.dumps(schema))), record)
    assert read_prefix(out.getvalue()) == (event["event_id"], event["producer_id"], 2**40 + 7)
