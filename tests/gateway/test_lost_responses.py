"""Retries after lost responses, on new connections, across the workers of one gateway (issue 14 item 14): every
retry of a committed batch is answered from the shared committed-batch cache and nothing is written twice."""

from __future__ import annotations

import uuid

import pytest

from stack.topics import EVENTS_TOPIC
from tests.gateway.helpers import batch, dumps, http_post, json_headers, page_view, zstd
from tests.support.kafka import consume_all, end_offsets

pytestmark = pytest.mark.integration
BATCHES = 40


def test_every_retry_is_answered_from_the_shared_cache_whichever_worker_gets_it(
        gateway_url: str, write_key: str, bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    marker = uuid.uuid4().hex
    start = end_offsets(bootstrap, EVENTS_TOPIC)
    bodies = [zstd(dumps(batch(page_view(2 * i, marker), page_view(2 * i + 1, marker)))) for i in range(BATCHES)]
    for body in bodies:  # each request on its own connection: SO_REUSEPORT spreads them over the workers
        status, answer, _ = http_post(gateway_url + "/v1/batch", body, json_headers(write_key))
        assert status == 200 and answer["accepted"] == 2, answer
    replayed = 0
    for body in bodies:  # the response was "lost": the client sends the same batch again
        status, answer, headers = http_post(gateway_url + "/v1/batch", body, json_headers(write_key))
        assert status == 200 and answer["accepted"] == 2, answer
        replayed += headers.get("X-Headwater-Replayed") == "true"
    with capsys.disabled():
        print(f"\ncommitted-batch cache: {replayed} of {BATCHES} retries replayed ({100 * replayed / BATCHES:.0f} %)")
    assert replayed == BATCHES
    records = [r for r in consume_all(bootstrap, EVENTS_TOPIC, "read_committed", 2 * BATCHES, start=start)
               if marker.encode() in (r.value() or b"")]
    assert len(records) == 2 * BATCHES  # no duplicate was written
