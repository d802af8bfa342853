"""Unit tests of the answer checks: acknowledged events, retries with Retry-After, refusals, broken contracts."""

from __future__ import annotations

import json

import pytest

from loadtest.checks import Acked, Refused, Retry, judge, retry_after
from loadtest.nodes import Batch

pytestmark = pytest.mark.unit
BATCH = Batch(batch_id="b-1", body=b"", seqs=(10, 11, 12), event_ids=("e10", "e11", "e12"), raw_bytes=0)


def _ok(accepted: int, rejected: list[object], batch_id: str = "b-1") -> bytes:
    return json.dumps({"batch_id": batch_id, "accepted": accepted, "rejected": rejected}).encode()


def test_all_accepted() -> None:
    assert judge(BATCH, 200, None, _ok(3, [])) == Acked(((10, "e10"), (11, "e11"), (12, "e12")), ())


def test_partial_acceptance_keeps_only_accepted_events() -> None:
    outcome = judge(BATCH, 200, None, _ok(2, [{"index": 1, "code": "invalid_properties", "message": "x"}]))
    assert outcome == Acked(((10, "e10"), (12, "e12")), ((1, "invalid_properties"),))


@pytest.mark.parametrize(("body", "reason"), [
    (_ok(3, [], batch_id="other"), "batch_id"),
    (_ok(3, [{"index": 0, "code": "x"}]), "accepted=3"),
    (_ok(2, [{"index": 3, "code": "x"}]), "bad rejected entry"),
    (_ok(1, [{"index": 0, "code": "x"}, {"index": 0, "code": "y"}]), "bad rejected entry"),
    (b"not json", "not JSON"),
    (b"[1]", "not an object"),
    (json.dumps({"batch_id": "b-1", "accepted": True, "rejected": []}).encode(), "integer"),
])
def test_a_200_that_does_not_add_up_is_a_contract_violation(body: bytes, reason: str) -> None:
    outcome = judge(BATCH, 200, None, body)
    assert isinstance(outcome, Refused) and outcome.violation and reason in outcome.reason


@pytest.mark.parametrize(("status", "header", "delay"), [
    (503, "2", 2.0), (429, "1", 1.0), (500, None, None), (502, "soon", None), (0, None, None), (503, "9999", 60.0),
])
def test_retryable_answers(status: int, header: str | None, delay: float | None) -> None:
    outcome = judge(BATCH, status, header, b"{}")
    assert isinstance(outcome, Retry) and outcome.delay_s == delay


@pytest.mark.parametrize(("status", "violation"), [(400, True), (401, True), (413, False), (415, True), (422, True)])
def test_refusals(status: int, violation: bool) -> None:
    outcome = judge(BATCH, status, None, b'{"code": "x"}')
    assert isinstance(outcome, Refused) and outcome.violation is violation


def test_retry_after_parsing() -> None:
    assert retry_after(" 3 ") == 3.0
    assert retry_after("-1") == 0.0
    assert retry_after("") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") is None
