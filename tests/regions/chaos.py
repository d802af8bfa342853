"""What the region fault suite measures at the Kafka level: each region's view of a run's events (read_committed: its
own `headwater.events` plus the other's mirrored `<other>.headwater.events`, by distinct event_id, as the pipelines
count them), MirrorMaker 2's CPU and memory from /proc, and the one summary block the suite prints.

Scale: HEADWATER_CHAOS_REGIONS=full (`make chaos-regions`) runs every SDK, the partition and the MirrorMaker 2
cost at RATE x HEADWATER_CHAOS_SCALE events/s per SDK, with both regions' pipelines running (their counts checked
too; HEADWATER_CHAOS_PIPELINES=0 leaves them out); otherwise (`make test`) one SDK at RATE events/s, no pipeline.
With the pipelines the scale is at most PIPELINE_SCALE_MAX: two Spark pipelines beside two stacks, MirrorMaker 2 and
three SDKs at 500 events/s each are more than a 2-core host serves (that load reached 8.5 without the pipelines).
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.kafka_read import read_to_end
from loadtest.kafka_scan import WriterSchemas, identity
from stack.mirror import remote_topic
from stack.regions import NAMES, Regions
from stack.topics import EVENTS_TOPIC
from tests.support.kafka import end_offsets

FULL = os.environ.get("HEADWATER_CHAOS_REGIONS", "") == "full"
PIPELINES = FULL and os.environ.get("HEADWATER_CHAOS_PIPELINES", "1") != "0"
PIPELINE_SCALE_MAX = 2
ASKED_SCALE = max(1, int(os.environ.get("HEADWATER_CHAOS_SCALE", "1"))) if FULL else 1
SCALE = min(ASKED_SCALE, PIPELINE_SCALE_MAX) if PIPELINES else ASKED_SCALE
RATE = 100.0  # events/s per SDK client at scale 1
SUMMARY: list[str] = []  # the lines the suite prints at its end (tests/regions/conftest.py)


def report(line: str) -> None:
    """One figure of the summary block, printed now as well."""
    SUMMARY.append(line)
    print(f"\nregions-chaos: {line}", flush=True)


def load_average() -> str:
    """The host's load average (1, 5, 15 min), as `uptime` prints it."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _header(headers: Any, name: str) -> str:
    for key, value in headers or ():
        if key == name:
            return value.decode() if isinstance(value, bytes) else str(value or "")
    return ""


@dataclass
class RegionView:
    """A region's copy of one run's events (the run's producers only): every record read so far per topic, by
    event_id, read on from where the last `refresh` stopped."""

    name: str
    bootstrap: str
    registry_url: str
    producers: Collection[str]
    topics: tuple[str, ...] = ()
    records: collections.Counter[str] = field(default_factory=collections.Counter)
    newest_ms: dict[str, int] = field(default_factory=dict)  # per topic, the newest record's CreateTime
    written_ms: dict[str, dict[str, int]] = field(default_factory=dict)  # per topic, event_id -> its CreateTime
    _offsets: dict[str, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def at_end(cls, regions: Regions, name: str, producers: Collection[str]) -> RegionView:
        """From each topic's current end (taken before the run's producers start)."""
        cfg = regions.stack(name).cfg
        topics = (EVENTS_TOPIC, *(remote_topic(o, EVENTS_TOPIC) for o in NAMES if o != name))
        view = cls(name, cfg.bootstrap, cfg.registry_url, producers, topics)
        view._offsets = {t: end_offsets(cfg.bootstrap, t) for t in topics}
        return view

    def refresh(self, timeout_s: float = 60.0) -> RegionView:
        schemas = WriterSchemas(self.registry_url)
        for topic in self.topics:
            offsets = self._offsets[topic]
            for msg in read_to_end(self.bootstrap, topic, start=offsets, timeout_s=timeout_s):
                partition, offset = msg.partition(), msg.offset()
                if partition is None or offset is None:
                    continue
                offsets[partition] = offset + 1
                if _header(msg.headers(), "producer_id") not in self.producers:
                    continue
                event_id, _, _ = identity(msg.value() or b"", schemas)
                written = msg.timestamp()[1]
                self.records[event_id] += 1
                self.written_ms.setdefault(topic, {}).setdefault(event_id, written)
                self.newest_ms[topic] = max(self.newest_ms.get(topic, 0), written)
        return self

    def distinct(self) -> set[str]:
        return set(self.records)

    def written_before(self, topic: str, wall_s: float) -> set[str]:
        """The event ids `topic` holds with a CreateTime before `wall_s` (epoch seconds)."""
        return {e for e, ms in self.written_ms.get(topic, {}).items() if ms < wall_s * 1000}

    def duplicates(self) -> int:
        """Records beyond the first of each event_id (a batch whose answer was lost, accepted again)."""
        return sum(self.records.values()) - len(self.records)


def wait_holding(view: RegionView, wanted: set[str], timeout_s: float) -> float:
    """Seconds until `view` holds every event id of `wanted`; fails with the count still missing."""
    t0 = time.monotonic()
    while True:
        missing = wanted - view.refresh().distinct()
        if not missing:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout_s, \
            f"region {view.name}: {len(missing)} of {len(wanted)} acknowledged events missing after {timeout_s:.0f} s"
        time.sleep(1.0)


@dataclass(frozen=True)
class ProcUsage:
    """A process's CPU seconds (user + system) and resident memory at one moment, from /proc."""

    t: float
    cpu_s: float
    rss_mb: float

    @classmethod
    def of(cls, pid: int) -> ProcUsage:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu_s = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14 and 15 of stat)
        status = Path(f"/proc/{pid}/status").read_text()
        kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        return cls(time.monotonic(), cpu_s, kb / 1024)
