"""Property test of the whole client: whatever the gateway answers, every event ends in exactly one final state."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import headwater
from headwater import MemoryTransport, Request, Response

from .helpers import body_of, error, ok

pytestmark = pytest.mark.unit
ANSWERS = st.sampled_from(["ok", "503", "429", "500", "conn", "413", "422", "reject_first", "400"])


class Gateway:
    """Answers batches from a drawn script (then 200), recording which seqs it acknowledged."""

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.acked: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> Response:
        events = body_of(request)["events"]
        with self.lock:
            answer = self.script.pop(0) if self.script else "ok"
            if answer == "conn":
                raise headwater.TransportError("connection reset")
            if answer in ("503", "429", "500", "400"):
                return error(int(answer), retry_after="0")
            if answer == "413":
                return error(413)
            if answer == "422":
                return ok(0, [{"index": i, "code": "bad", "message": "m"} for i in range(len(events))], status=422)
            rejected = [{"index": 0, "code": "bad", "message": "m"}] if answer == "reject_first" else []
            self.acked.extend(e["seq"] for e in events[len(rejected):])
            return ok(len(events) - len(rejected), rejected)


@settings(max_examples=25, deadline=None)
@given(script=st.lists(ANSWERS, max_size=12), n=st.integers(min_value=1, max_value=120),
       batch=st.integers(min_value=1, max_value=40))
def test_every_event_is_acknowledged_rejected_or_dropped_exactly_once(script: list[str], n: int,
                                                                     batch: int) -> None:
    gateway = Gateway(script)
    client = headwater.Client("http://gw", "k", transport=MemoryTransport(gateway), max_batch_events=batch,
                              linger_s=0.001, retry_base_s=0.001, retry_max_s=0.002, on_error=lambda e: None)
    for i in range(n):
        client.track("page_view", {"i": i})
    closed = client.close(30)
    m = client.metrics()
    assert m.acknowledged + m.rejected + m.dropped_total == n
    assert closed is (m.acknowledged == n)  # close() is True exactly when every event was acknowledged
    assert len(gateway.acked) == len(set(gateway.acked)) == m.acknowledged  # never acknowledged twice
    assert set(gateway.acked) <= set(range(n))
