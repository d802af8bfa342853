"""A producer process for the fault suite's `kill -9` of a producer: sends batches in seq order, retrying each until
acknowledged, and appends every acknowledged event to a file (flushed) before sending the next batch.

    python -m tests.gateway.fault_producer <acks file> <producer id>   (GATEWAY_URL, HEADWATER_WRITE_KEY from env)
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import uuid

from tests.gateway.helpers import batch, dumps, http_post, json_headers, page_view, zstd

EVENTS_PER_BATCH = 10


def main(acks_path: str, producer: str) -> int:
    url = os.environ["GATEWAY_URL"] + "/v1/batch"
    headers = json_headers(os.environ["HEADWATER_WRITE_KEY"])
    marker = uuid.uuid4().hex
    with open(acks_path, "a", buffering=1) as acks:
        seq = 0
        while True:
            events = [page_view(seq + i, marker, producer_id=producer) for i in range(EVENTS_PER_BATCH)]
            body = zstd(dumps(batch(*events)))
            while True:
                try:
                    status, _, _ = http_post(url, body, headers, timeout=30)
                except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                    status = 0
                if status == 200:
                    break
                time.sleep(0.1)
            acks.write("".join(f"{producer}\t{e['seq']}\t{e['event_id']}\n" for e in events))
            acks.flush()
            seq += EVENTS_PER_BATCH


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
