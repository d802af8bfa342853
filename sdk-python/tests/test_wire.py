"""Wire format pieces: bodies, compression, answers, Retry-After and status classification."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from headwater._batcher import Batch
from headwater._retry import Outcome, backoff, classify
from headwater._wire import compress, json_body, parse_answer, parse_error, parse_retry_after

pytestmark = pytest.mark.unit
SPECS = Path(__file__).parents[2] / "sdk-specs"


def test_json_body_is_the_protocol_batch() -> None:
    batch = Batch("b-1", "p", 0, 1, (b'{"seq":0}', b'{"seq":1}'))
    doc = json.loads(json_body(batch, 123))
    assert doc == {"batch_id": "b-1", "sent_at": 123, "sdk": {"name": "headwater-python", "version": "0.1.0"},
                   "events": [{"seq": 0}, {"seq": 1}]}


def test_avro_body_reads_with_the_spec_schema() -> None:
    fastavro = pytest.importorskip("fastavro")  # the `avro` extra; installed by `make setup`
    from headwater._avro import avro_body, avro_event

    schema = fastavro.parse_schema(json.loads((SPECS / "batch.avsc").read_text()))
    event_schema = fastavro.parse_schema({"type": "record", "name": "e", "fields": [{"name": "n", "type": "long"}]})
    framed = avro_event({"n": 5}, 258, event_schema)
    assert framed[:5] == b"\x00\x00\x00\x01\x02"
    body = avro_body("b-1", 99, [framed])
    doc: Any = fastavro.schemaless_reader(io.BytesIO(body), schema)
    assert doc["batch_id"] == "b-1" and doc["sent_at"] == 99 and doc["events"] == [framed]
    assert fastavro.schemaless_reader(io.BytesIO(framed[5:]), event_schema) == {"n": 5}


def test_compression_round_trips() -> None:
    body = b'{"x":1}' * 100
    assert zstandard.ZstdDecompressor().decompressobj().decompress(compress(body, "zstd")) == body
    assert gzip.decompress(compress(body, "gzip")) == body
    assert compress(body, "identity") == body


def test_answers_and_errors() -> None:
    ans = parse_answer(b'{"batch_id":"b","accepted":1,"rejected":[{"index":1,"code":"bad","message":"m"}]}')
    assert ans.accepted == 1 and ans.rejected[0].index == 1 and ans.rejected[0].code == "bad"
    assert parse_answer(b"garbage").rejected == ()
    assert parse_error(b'{"code":"c","message":"m"}') == ("c", "m")
    assert parse_error(b"<html>")[0] == ""


def test_retry_after() -> None:
    assert parse_retry_after("3", 0) == 3.0
    assert parse_retry_after(None, 0) is None
    assert parse_retry_after("soon", 0) is None
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", 4.0) == 6.0


@pytest.mark.parametrize(("status", "outcome"), [  # protocol.md §4: an explicit retryable set
    (200, Outcome.DONE), (422, Outcome.DONE), (413, Outcome.SPLIT),
    (408, Outcome.RETRY), (429, Outcome.RETRY), (500, Outcome.RETRY), (502, Outcome.RETRY), (503, Outcome.RETRY),
    (504, Outcome.RETRY),
    (400, Outcome.REFUSED), (401, Outcome.REFUSED), (403, Outcome.REFUSED), (404, Outcome.REFUSED),
    (405, Outcome.REFUSED), (415, Outcome.REFUSED), (409, Outcome.REFUSED), (302, Outcome.REFUSED),
    (501, Outcome.REFUSED), (505, Outcome.REFUSED), (418, Outcome.REFUSED),
])
def test_classify(status: int, outcome: Outcome) -> None:
    assert classify(status) is outcome


def test_backoff_is_full_jitter_capped_and_honours_retry_after() -> None:
    for attempt in range(1, 20):
        assert 0 <= backoff(attempt, 0.5, 30.0, None) <= min(30.0, 0.5 * 2 ** (attempt - 1))
    assert backoff(1, 0.5, 30.0, 7.0) >= 7.0


def test_zstd_compression_from_many_threads_at_once_stays_correct() -> None:
    """Several clients' sender threads compress concurrently (a shared compressor corrupted frames)."""
    import threading

    bodies = [json.dumps({"n": i, "pad": "x" * (2000 + i)}).encode() for i in range(16)]
    failures: list[str] = []
    start = threading.Barrier(len(bodies))

    def work(body: bytes) -> None:
        start.wait()
        try:
            for _ in range(300):
                if zstandard.ZstdDecompressor().decompress(compress(body, "zstd")) != body:
                    failures.append("mismatch")
                    return
        except zstandard.ZstdError as exc:
            failures.append(repr(exc))

    threads = [threading.Thread(target=work, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
