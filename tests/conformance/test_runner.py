"""The runner itself: a deliberately broken SDK fails exactly the vectors of the MUST it breaks; bad vectors fail."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from hwconformance.checks import check_expectations
from hwconformance.mockgw import MockGateway, Recorded
from hwconformance.patterns import Matcher, Mismatch, retry_after_seconds, split_id
from hwconformance.results import FAIL, PASS, XFAIL, XPASS, settle, summary_line
from hwconformance.runner import run_sdk
from hwconformance.sdkcase import Run, Sdk
from hwconformance.vectors import VectorError, load, validate
from hwconformance.wire import frame, unframe

FAKE = str(Path(__file__).with_name("fake_sdk.py"))
CHOSEN = ["responses/retry-429-retry-after", "responses/retry-503-retry-after", "responses/retry-500",
          "responses/200-with-rejected", "responses/413-split-halves", "responses/refused-401",
          "responses/retry-after-capped"]
# What each broken behaviour must make fail among CHOSEN (everything else there must still pass).
BREAKS = {
    "ignore_retry_after": {"responses/retry-429-retry-after", "responses/retry-503-retry-after",
                           "responses/retry-after-capped"},
    "new_batch_id_on_retry": {"responses/retry-429-retry-after", "responses/retry-503-retry-after",
                              "responses/retry-500", "responses/retry-after-capped"},
    "resend_rejected": {"responses/200-with-rejected"},
    "split_reuses_parent_id": {"responses/413-split-halves"},
    "retry_refused": {"responses/refused-401"},
    "uncapped_retry_after": {"responses/retry-after-capped"},
}


def _run(brk: str) -> dict[str, str]:
    vectors = [v for v in load() if v["id"] in CHOSEN]
    assert {v["id"] for v in vectors} == set(CHOSEN)
    sdk = Sdk(name=f"fake-{brk}", driver=[sys.executable, FAKE, brk])
    results = run_sdk(sdk, vectors, out=io.StringIO())
    return {r.vector: r.status for r in results}


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_unbroken_fake_sdk_passes_the_chosen_vectors() -> None:
    assert _run("none") == dict.fromkeys(CHOSEN, PASS)


@pytest.mark.integration
@pytest.mark.timeout(600)
@pytest.mark.parametrize("brk", sorted(BREAKS))
def test_a_broken_behaviour_fails_its_vectors(brk: str) -> None:
    got = _run(brk)
    assert {v for v, s in got.items() if s == FAIL} == BREAKS[brk], got


@pytest.mark.unit
def test_a_malformed_vector_is_refused_with_its_field() -> None:
    good = json.loads(next(Path(load.__globals__["VECTORS"]).glob("responses/retry.json")).read_text())[0]
    validate(good, "good")
    for broken in ({**good, "steps": []}, {**good, "id": "nowhere/x"}, {**good, "surprise": 1},
                   {**good, "needs": ["teleport"]}):
        with pytest.raises(VectorError):
            validate(broken, "broken")


@pytest.mark.unit
def test_patterns() -> None:
    m = Matcher()
    m.check({"a": {"$uuid": 7}, "b": {"$optional": True, "$type": "string"}},
            {"a": "0193e0c2-6a4d-7aa0-8d55-6a3b1f0c2e11", "x": 1})
    m.check({"$capture": "p"}, "parent")
    m.check({"$split_of": ["p", 1]}, split_id("parent", 1))
    for pattern, value in (({"$uuid": 4}, "0193e0c2-6a4d-7aa0-8d55-6a3b1f0c2e11"), ({"$min": 1.0}, 0.5),
                           ([1, 2], [1, 2, 3]), ({"a": {"$absent": True}}, {"a": None}), (True, 1),
                           ({"$same": "p"}, "other"), ({"$epoch_ms": True}, 12)):
        with pytest.raises(Mismatch):
            m.check(pattern, value)


def _two_gateways(sent: list[tuple[str, str, list[int], int]]) -> Run:
    """A run whose mocks (never started) recorded `sent`: (gateway, batch_id, seqs, status) in order."""
    mocks = {name: MockGateway(name=name) for name in ("primary", "secondary")}
    for mock in mocks.values():
        mock.stop()
    for t, (name, batch_id, seqs, status) in enumerate(sent):
        events = [{"event_id": f"e{seq}", "seq": seq} for seq in seqs]
        batch = {"batch_id": batch_id, "sdk": {"name": "fake", "version": "1"}, "events": events}
        mocks[name].requests.append(Recorded(method="POST", path="/v1/batch", body=json.dumps(batch).encode(),
                                             headers={"user-agent": "fake/1 (py/3)"}, decoded=batch, conn=1,
                                             t=float(t), gateway=name, status=status))
    return Run(mocks["primary"], mocks=mocks, hello={"sdk": "fake", "version": "1"})


@pytest.mark.unit
def test_the_gateways_expectation_holds_the_failover_invariants() -> None:
    expect = {"gateways": {"primary": {"requests_min": 1},
                           "secondary": {"acknowledged_seqs": [0, 2], "resends_batches_of": "primary"}}}
    good = [("primary", "b1", [0, 1], 503), ("secondary", "b1", [0, 1], 200), ("secondary", "b2", [2], 200)]
    assert check_expectations(expect, _two_gateways(good), Matcher(), frozenset()) == []
    new_id = [("primary", "b1", [0, 1], 503), ("secondary", "bX", [0, 1], 200), ("secondary", "b2", [2], 200)]
    assert "never came here with the same id" in "".join(
        check_expectations(expect, _two_gateways(new_id), Matcher(), frozenset()))
    twice = [*good, ("secondary", "b3", [2], 200)]
    assert "each exactly once" in "".join(check_expectations(expect, _two_gateways(twice), Matcher(), frozenset()))
    stayed = [("primary", "b1", [0, 1], 503), ("primary", "b1", [0, 1], 200), ("primary", "b2", [2], 200)]
    assert "acknowledged the seqs [] (0 events)" in "".join(
        check_expectations(expect, _two_gateways(stayed), Matcher(), frozenset()))


@pytest.mark.unit
def test_xfail_and_xpass_are_reported_apart() -> None:
    xf = {"v/1": "fixed by issue 15"}
    assert settle("t", "v/1", False, "boom", xfails=xf, seconds=0).status == XFAIL
    assert settle("t", "v/1", True, "", xfails=xf, seconds=0).status == XPASS
    assert settle("t", "v/2", False, "boom", xfails=xf, seconds=0).status == FAIL
    results = [settle("t", "v/1", False, "", xfails=xf, seconds=0),
               settle("t", "v/2", True, "", xfails=xf, seconds=0)]
    assert summary_line("t", results) == "t: 1 passed, 0 failed (1 xfail)"


@pytest.mark.unit
def test_the_fixtures_hold_for_the_reference_implementation() -> None:
    fixtures = [v["fixture"] for v in load() if v["id"].startswith("fixtures/")]
    assert {f["kind"] for f in fixtures} == {"split_ids", "avro_framing", "retry_after"}
    for f in fixtures:
        if f["kind"] == "split_ids":
            assert [split_id(f["parent"], k) for k in (0, 1)] == f["halves"]
        elif f["kind"] == "avro_framing":
            data = bytes.fromhex(f["framed_hex"])
            assert frame(f["schema_id"], f["schema"], f["record"]) == data
            assert unframe(data, {f["schema_id"]: f["schema"]})["record"] == f["record"]
        else:
            assert retry_after_seconds(f["header"], f["now"]) == f["seconds"]
