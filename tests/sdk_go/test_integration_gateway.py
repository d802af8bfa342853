"""The Go SDK against the real gateway and Kafka: every (producer_id, seq) exactly once; kill -9 and restart."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.sdk_events import EVENTS_TOPIC, arrived
from tests.support.kafka import end_offsets
from tests.support.ports import free_port
from tests.support.producers import producer_env

pytestmark = pytest.mark.integration
SDK_GO = Path(__file__).resolve().parents[2] / "sdk-go"
GO = shutil.which("go") or "/usr/local/go/bin/go"
# Retries quick enough for a test (the SDK's defaults are for production).
QUICK_RETRIES = {"HEADWATER_RETRY_BASE_S": "0.05", "HEADWATER_RETRY_MAX_S": "0.5"}


@pytest.fixture(scope="module")
def producer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go SDK's test producer (sdk-go/cmd/headwater-produce), built once."""
    out = tmp_path_factory.mktemp("go-bin") / "headwater-produce"
    subprocess.run([GO, "build", "-o", str(out), "./cmd/headwater-produce"], cwd=SDK_GO, check=True, timeout=600,
                   env={**os.environ, "GOTOOLCHAIN": "local"})
    return out


@pytest.fixture(scope="module")
def gateway(stack_env: dict[str, str]) -> dict[str, str]:
    if "GATEWAY_URL" not in stack_env:
        pytest.fail("the stack has no GATEWAY_URL: its gateway did not register (see the stack fixture's log)")
    return stack_env


def run_producer(binary: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_ten_thousand_events_from_goroutines_arrive_once_per_seq(producer: Path, gateway: dict[str, str],
                                                                  tmp_path: Path) -> None:
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    env = producer_env(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], tmp_path / "spool", **QUICK_RETRIES)
    result = run_producer(producer, env, "-events", "10000", "-goroutines", "8", "-run", f"run-{uuid.uuid4()}")
    assert result["close_error"] is None, result
    assert result["acknowledged"] == 10_000 and result["dropped"] == {} and result["rejected"] == 0, result
    by_seq = arrived(gateway, result["producer_id"], 10_000, start)
    assert sorted(by_seq) == list(range(10_000))
    assert all(len(ids) == 1 for ids in by_seq.values())  # one event id per seq: retries are true duplicates


def test_kill_9_then_restart_on_the_same_spool_delivers_every_spooled_event(
        producer: Path, gateway: dict[str, str], tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    unreachable = f"http://127.0.0.1:{free_port()}"  # nothing listens: every send fails and is retried
    proc = subprocess.Popen([str(producer), "-events", "500", "-goroutines", "4", "-hold"], text=True,
                            env=producer_env(unreachable, gateway["HEADWATER_WRITE_KEY"], spool, **QUICK_RETRIES),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once every event is in a spool file
        assert line, proc.stderr.read() if proc.stderr else ""
        held = json.loads(line)
        assert held["pending_events"] == 500 and held["acknowledged"] == 0, held
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert len(list((spool / "batches").glob("*.hwb"))) >= 500 // 40
    env = producer_env(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], spool, **QUICK_RETRIES)
    result = run_producer(producer, env, "-events", "10", "-goroutines", "2")
    assert result["producer_id"] == held["producer_id"]
    assert result["close_error"] is None and result["acknowledged"] == 510 and result["dropped"] == {}, result
    by_seq = arrived(gateway, held["producer_id"], 510, start)
    assert set(range(500)) <= set(by_seq) and len(by_seq) == 510
    assert min(set(by_seq) - set(range(500))) >= 500  # a restarted producer never reuses a seq
    assert all(len(ids) == 1 for ids in by_seq.values())
    assert not list((spool / "batches").glob("*.hwb"))


def test_avro_fast_path_reaches_kafka(producer: Path, gateway: dict[str, str], tmp_path: Path) -> None:
    if "REGISTRY_URL" not in gateway:
        pytest.fail("the stack has no REGISTRY_URL: its registry did not register")
    start = end_offsets(gateway["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    env = producer_env(gateway["GATEWAY_URL"], gateway["HEADWATER_WRITE_KEY"], tmp_path / "spool", **QUICK_RETRIES)
    env.update(HEADWATER_WIRE_FORMAT="avro", HEADWATER_REGISTRY_URL=gateway["REGISTRY_URL"])
    result = run_producer(producer, env, "-events", "200", "-goroutines", "2", "-run", f"run-{uuid.uuid4()}")
    assert result["close_error"] is None and result["acknowledged"] == 200 and result["rejected"] == 0, result
    assert sorted(arrived(gateway, result["producer_id"], 200, start)) == list(range(200))
