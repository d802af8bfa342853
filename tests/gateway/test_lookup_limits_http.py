"""Registry amplification over real HTTP (issue 14 item 6): batches of random unknown schema ids cost a bounded
number of registry lookups, then 429 `schema_lookups_limited`; known schemas keep flowing for everyone."""

from __future__ import annotations

import random
import time

import aiohttp
import pytest

from common.avro_frame import frame
from tests.gateway.helpers import FakeProducer, FakeRegistry, avro_batch, batch, dumps, page_view, zstd
from tests.gateway.test_http import headers, post, run

pytestmark = pytest.mark.integration  # real sockets (fake registry and producer behind)
AVRO = "application/vnd.headwater.batch+avro"


async def _flood(url: str, s: aiohttp.ClientSession, _p: list[FakeProducer], registry: FakeRegistry) -> None:
    t0 = time.monotonic()
    statuses = []
    for _ in range(30):
        ids = random.sample(range(10_000, 2**31), 10)
        body = avro_batch([frame(i, b"\x00") for i in ids])
        status, answer, hdrs = await post(s, url, zstd(body), headers(ctype=AVRO))
        statuses.append(status)
        if status == 429:
            assert answer["code"] == "schema_lookups_limited" and int(hdrs["Retry-After"]) >= 1
    elapsed = time.monotonic() - t0
    lookups = sum(1 for c in registry.calls if c.startswith("/schemas/ids/"))
    # burst 20 + 5/s refill (+ one batch of slack): far below the 300 ids sent
    assert lookups <= 20 + 5 * elapsed + 10, (lookups, elapsed)
    assert statuses.count(429) >= 20, statuses
    status, answer, _ = await post(s, url, zstd(dumps(batch(page_view()))), headers())
    assert status == 200 and answer["accepted"] == 1  # cached schemas need no lookup: not limited


test_unknown_schema_ids_are_looked_up_within_the_source_budget = run(_flood)
