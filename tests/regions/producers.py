"""SDK producers for the region fault suite: each SDK's own conformance driver (sdk-specs/conformance/sdks.json,
DRIVER.md) run as a separate process with an ordered list of endpoints, tracking paced events with caller-chosen
event ids and sampling the SDK's counters (acknowledged, failovers, failbacks) every SAMPLE_S.

The drivers are the ones `make conformance` builds (Go: `go build`, TypeScript: `node scripts/build.mjs build`), so
the Go and TypeScript clients measured here are the shipped SDKs through their public API, not re-implementations.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwconformance.driverproc import DriverError, DriverProcess
from hwconformance.runner import load_sdks, prepare
from hwconformance.sdkcase import Sdk
from hwconformance.vectors import REPO

from tests.support.events import page_view_properties

SAMPLE_S = 0.1  # how often a producer reads its SDK's counters (the resolution of every measured time)


@dataclass(frozen=True)
class Sample:
    """The SDK's counters at monotonic time `t`."""

    t: float
    acknowledged: int
    failovers: int
    failbacks: int


def recovery_s(samples: list[Sample], since: float) -> float | None:
    """Seconds from `since` (a region's loss) to the first sample at which events were acknowledged through the next
    endpoint: a failover counted after `since`, and the acknowledged count above its highest value before that
    failover (what the old endpoint acknowledged before it died); None if not yet."""
    before = [s for s in samples if s.t < since]
    base_failovers = before[-1].failovers if before else 0
    acked_on_old = before[-1].acknowledged if before else 0
    for s in samples:
        if s.t < since:
            continue
        if s.failovers == base_failovers:
            acked_on_old = max(acked_on_old, s.acknowledged)
        elif s.acknowledged > acked_on_old:
            return s.t - since
    return None


def failback_s(samples: list[Sample], since: float) -> float | None:
    """Seconds from `since` to the first sample counting one more failback than before `since`; None if not yet."""
    before = [s for s in samples if s.t < since]
    base = before[-1].failbacks if before else 0
    return next((s.t - since for s in samples if s.t >= since and s.failbacks > base), None)


def ready_sdk(name: str) -> Sdk:
    """The registered SDK `name`, its driver built and answering `hello` (a failed build fails the caller)."""
    sdk = next((s for s in load_sdks() if s.name == name), None)
    assert sdk is not None, f"no SDK {name!r} in sdk-specs/conformance/sdks.json"
    problem = prepare(sdk)
    assert problem is None, f"{name} driver: {problem}"
    assert "event_id" in sdk.capabilities, f"{name} driver cannot take caller-chosen event ids"
    return sdk


class SdkProducer:
    """One SDK client (one driver process, one producer id) sending `rate` events/s to `endpoints` (in failover
    order) with the SDK's default failover settings, until `stop()`; every tracked event id is kept."""

    def __init__(self, sdk: Sdk, endpoints: list[str], write_key: str, rate: float, workdir: Path, *,
                 label: str = "") -> None:
        self.sdk = sdk
        self.label = label or sdk.name
        self.endpoints = endpoints
        self.rate = rate
        self.workdir = workdir
        self.run = uuid.uuid4().hex
        self.lock = threading.Lock()
        self.samples: list[Sample] = []
        self.event_ids: list[str] = []
        self.errors: list[str] = []
        self.final: dict[str, Any] = {}
        self.delivered_all: bool | None = None
        self._stop = threading.Event()
        workdir.mkdir(parents=True, exist_ok=True)
        self.driver = DriverProcess(sdk.driver, REPO, workdir / "stderr")
        try:
            hello = self.driver.call({"cmd": "hello"})
            assert hello.get("ok"), f"{self.label}: hello: {hello}"
            init = self.driver.call({"cmd": "init", "endpoint": endpoints[0], "write_key": write_key,
                                     "spool_dir": None,
                                     "options": {"endpoints": endpoints, "node_id": f"regions-{self.label}",
                                                 "linger_s": 0.1, "max_queue_events": 2_000_000,
                                                 "retry_deadline_s": 900.0}})
            assert init.get("ok") and init.get("producer_id"), f"{self.label}: init: {init}"
        except BaseException:
            self.driver.kill()
            raise
        self.producer_id = str(init["producer_id"])
        self._thread = threading.Thread(target=self._produce, name=f"producer-{self.label}", daemon=True)

    def start(self) -> SdkProducer:
        self._thread.start()
        return self

    def _produce(self) -> None:
        interval = 1.0 / self.rate
        next_at = next_sample = time.monotonic()
        i = 0
        try:
            while not self._stop.is_set():
                event_id = str(uuid.uuid4())
                reply = self.driver.call({"cmd": "track", "event_type": "page_view",
                                          "properties": page_view_properties(i, self.run,
                                                                             user_agent=f"regions-{self.label}",
                                                                             load_time_ms=12.5),
                                          "partition_key": f"k-{i % 64}", "event_id": event_id})
                with self.lock:
                    if reply.get("ok"):
                        self.event_ids.append(event_id)
                    else:
                        self.errors.append(f"track: {reply.get('error')}")
                i += 1
                now = time.monotonic()
                if now >= next_sample:
                    self._sample()
                    next_sample = now + SAMPLE_S
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    self._stop.wait(pause)
        except DriverError as exc:
            with self.lock:
                self.errors.append(f"driver: {exc}")

    def _sample(self) -> None:
        stats = self.driver.call({"cmd": "stats"})
        if not stats.get("ok"):
            raise DriverError(f"stats: {stats}")
        sample = Sample(time.monotonic(), int(stats["acknowledged"]), int(stats["failovers"]),
                        int(stats["failbacks"]))
        with self.lock:
            self.samples.append(sample)
            self.final = stats

    # --- what the suite waits on and measures -----------------------------------------------------------------
    def last(self) -> Sample:
        with self.lock:
            return self.samples[-1] if self.samples else Sample(time.monotonic(), 0, 0, 0)

    def tracked(self) -> int:
        with self.lock:
            return len(self.event_ids)

    def recovery_s(self, since: float) -> float | None:
        with self.lock:
            return recovery_s(list(self.samples), since)

    def failed_back_after(self, since: float) -> float | None:
        with self.lock:
            return failback_s(list(self.samples), since)

    def stop(self, close_timeout_s: float = 300.0) -> None:
        """Stop tracking, close the client (flushing everything accepted), read its final counters."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), f"{self.label}: the producing thread did not stop"
        try:
            closed = self.driver.call({"cmd": "close", "timeout_s": close_timeout_s}, close_timeout_s + 30)
            stats = self.driver.call({"cmd": "stats"})
        finally:
            self.driver.stop()
        assert closed.get("ok") and stats.get("ok"), f"{self.label}: close {closed}, stats {stats}"
        self.delivered_all = bool(closed["delivered_all"])
        self.final = stats

    def abort(self) -> None:
        """Stop tracking and kill the driver (a test that failed half-way leaves no client sending)."""
        self._stop.set()
        self.driver.kill()
        self._thread.join(10)

    def check_delivered(self) -> None:
        """The SDK's own account: every tracked event acknowledged, nothing refused or dropped."""
        assert not self.errors, f"{self.label}: {self.errors[:3]}"
        assert self.delivered_all, f"{self.label}: close did not deliver everything: {self.final}"
        assert self.final["acknowledged"] == len(self.event_ids) == self.final["enqueued"], \
            f"{self.label}: tracked {len(self.event_ids)}, SDK counters {self.final}"
