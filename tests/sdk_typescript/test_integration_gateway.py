"""The TypeScript SDK against the real gateway, registry and Kafka: 10,000 events exactly once per seq; kill -9."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.sdk_events import EVENTS_TOPIC, arrived
from tests.support.kafka import end_offsets
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PRODUCER = ROOT / "sdk-typescript" / "build" / "test" / "fixtures" / "produce.js"


@pytest.fixture(scope="module")
def gateway(stack_env: dict[str, str]) -> dict[str, str]:
    """The stack's endpoints; the Node producer must have been built by `make setup`."""
    if "GATEWAY_URL" not in stack_env:
        pytest.fail("the stack has no GATEWAY_URL: its gateway did not register (see the stack fixture's log)")
    if shutil.which("node") is None or not PRODUCER.exists():
        pytest.fail(f"{PRODUCER} is missing: run `make setup` (setup/setup-node.sh builds the TypeScript SDK)")
    return stack_env


def produce(endpoint: str, key: str, spool: Path, count: int, run: str, *, mode: str = "send",
            registry: str = "") -> dict[str, Any]:
    out = subprocess.run(["node", str(PRODUCER), endpoint, key, str(spool), str(count), run, mode, registry],
                         capture_output=True, text=True, timeout=600, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_ten_thousand_events_arrive_exactly_once_per_seq(gateway: dict[str, str], tmp_path: Path) -> None:
    run = f"run-{uuid.uuid4()}"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    result = produce(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], tmp_path / "spool", 10_000, run)
    metrics = result["metrics"]
    assert result["delivered"] and metrics["acknowledged"] == 10_000, result
    assert metrics["dropped"] == {} and metrics["rejected"] == 0, result
    by_seq = arrived(gateway, result["producer_id"], 10_000, start)
    assert sorted(by_seq) == list(range(10_000))
    assert all(len(ids) == 1 for ids in by_seq.values())  # one event id per seq: retries are true duplicates


def test_kill_9_then_restart_on_the_same_spool_delivers_every_spooled_event(gateway: dict[str, str],
                                                                            tmp_path: Path) -> None:
    run = f"run-{uuid.uuid4()}"
    spool = tmp_path / "spool"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there: every send fails and is retried
    proc = subprocess.Popen(["node", str(PRODUCER), dead, gateway["HEADWATER_WRITE_KEY"], str(spool), "2000", run,
                             "spool"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = json.loads(proc.stdout.readline())
        assert ready["spooled"] == 2_000
    finally:
        proc.kill()  # SIGKILL: no exit hook runs
        proc.wait(30)
    assert list((spool / "batches").glob("*.hwb")), "the batches are on disk"
    result = produce(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], spool, 0, run)
    assert result["producer_id"] == ready["producer_id"]
    assert result["delivered"] and result["metrics"]["acknowledged"] == 2_000, result
    by_seq = arrived(gateway, ready["producer_id"], 2_000, start)
    assert sorted(by_seq) == list(range(2_000))
    assert not list((spool / "batches").glob("*.hwb"))


def test_avro_fast_path_reaches_kafka(gateway: dict[str, str], tmp_path: Path) -> None:
    if "REGISTRY_URL" not in gateway:
        pytest.fail("the stack has no REGISTRY_URL: its registry did not register")
    run = f"run-{uuid.uuid4()}"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    result = produce(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], tmp_path / "spool", 200, run, mode="avro",
                     registry=gateway["REGISTRY_URL"])
    assert result["delivered"] and result["metrics"]["acknowledged"] == 200, result
    assert sorted(arrived(gateway, result["producer_id"], 200, start)) == list(range(200))
