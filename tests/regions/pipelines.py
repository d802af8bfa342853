"""Each region's Spark pipeline as the region fault suite sees it: started on the region's own stack.env, and what
it counted for one run's producers, read back per event_id from its committed `events/` output (the deduplicated
rows: docs/spark-pipeline.md, "Queries, sinks and output modes"), and what its live aggregates count in all."""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.dataset as ds  # type: ignore[import-untyped]

from common.envfile import read_env
from stack.regions import RegionStack
from stack.topics import AGGREGATES_TOPIC
from tests.sdk_events import Decoder
from tests.support.kafka import consume_all

# The pipeline's Parquet queries commit every HEADWATER_FILE_TRIGGER (30 s by default): a wait for its output is at
# least that long, plus the batch itself on a busy host.
WAIT_S = 300.0


def start_pipeline(region: RegionStack) -> None:
    """Start the region's pipeline (local mode) on the region's stack.env (its values win over the test's own
    environment), from its checkpoints if it ran before; returns once it serves /metrics."""
    region.pipeline().start(region.cfg, read_env(region.cfg.env_file))


def committed_files(sink: Path) -> list[str]:
    """The files a Spark file sink's `_spark_metadata` log lists (what Spark itself reads: a file a killed batch
    left half-written is not listed); none while the sink has committed nothing."""
    log_dir = sink / "_spark_metadata"
    if not log_dir.is_dir():
        return []
    added: set[str] = set()
    deleted: set[str] = set()
    for log in sorted(log_dir.iterdir()):
        if log.name.startswith("."):  # Spark's temp file of an entry being written
            continue
        for line in log.read_text().splitlines()[1:]:  # the first line is the format version, "v1"
            entry = json.loads(line)
            (added if entry["action"] == "add" else deleted).add(entry["path"].removeprefix("file://"))
    return sorted(added - deleted)


@dataclass
class PipelineCount:
    """How many rows region `name`'s pipeline wrote per event_id of `producers` (in its committed `events/`)."""

    name: str
    events_dir: Path
    producers: Collection[str]
    counts: collections.Counter[str] = field(default_factory=collections.Counter)

    @classmethod
    def of(cls, region: RegionStack, producers: Collection[str]) -> PipelineCount:
        return cls(region.name, Path(read_env(region.cfg.env_file)["HEADWATER_PIPELINE_DIR"]) / "events", producers)

    def refresh(self) -> PipelineCount:
        files = committed_files(self.events_dir)
        counts: collections.Counter[str] = collections.Counter()
        if files:
            dataset = ds.dataset(files, format="parquet", partitioning=ds.partitioning(flavor="hive"),
                                 partition_base_dir=str(self.events_dir))
            table = dataset.to_table(columns=["event_id"],
                                     filter=pc.field("producer_id").isin(sorted(self.producers)))
            counts.update(table.column("event_id").to_pylist())
        self.counts = counts
        return self

    def distinct(self) -> set[str]:
        return set(self.counts)

    def twice(self) -> int:
        """Event ids counted more than once."""
        return sum(1 for n in self.counts.values() if n > 1)


def wait_counted(pipelines: Collection[PipelineCount], acked: set[str], timeout_s: float = WAIT_S) -> float:
    """Seconds until every pipeline of `pipelines` has counted every id of `acked`; fails with what each still
    lacks."""
    t0 = time.monotonic()
    while True:
        lacking = {p.name: len(acked - p.refresh().distinct()) for p in pipelines}
        if not any(lacking.values()):
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout_s, \
            f"pipelines: acknowledged events not counted after {timeout_s:.0f} s, per region: {lacking}"
        time.sleep(2.0)


def check_once(p: PipelineCount, acked: set[str]) -> str:
    """Assert that pipeline `p` counted every acknowledged id exactly once and nothing else of the run's producers;
    the summary's line for it."""
    counted = p.distinct()
    line = (f"region {p.name}'s pipeline (events/ output): acknowledged {len(acked)} / counted {len(counted & acked)} "
            f"/ counted twice {p.twice()} / missing {len(acked - counted)} / not acknowledged {len(counted - acked)}")
    assert counted == acked and p.twice() == 0, line
    return line


# The tumbling granularities of the live aggregates (spark_pipeline/aggregate.py WINDOWS): each event is in exactly
# one window of each, so their windows' `events` add up to the events counted. ("5m/1m" slides: five windows each.)
TUMBLING = ("10s", "1m")


def aggregate_totals(region: RegionStack) -> dict[str, int]:
    """Per tumbling granularity, the events region `region`'s live aggregates count over every window: the last
    record of each key of its `headwater.aggregates` (an upsert by key), decoded through its own registry."""
    decode = Decoder(region.cfg.registry_url)
    latest: dict[bytes, dict[str, object]] = {}
    for msg in consume_all(region.cfg.bootstrap, AGGREGATES_TOPIC, "read_uncommitted", timeout_s=30):
        if (value := msg.value()) is not None:
            latest[msg.key() or b""] = decode(value)
    totals = dict.fromkeys(TUMBLING, 0)
    for row in latest.values():
        if (granularity := row.get("granularity")) in totals and isinstance(events := row.get("events"), int):
            totals[str(granularity)] += events
    return totals


def events_total(events_dir: Path) -> tuple[int, int]:
    """(rows, distinct event ids) of every producer in a pipeline's committed `events/` output."""
    files = committed_files(events_dir)
    if not files:
        return 0, 0
    dataset = ds.dataset(files, format="parquet", partitioning=ds.partitioning(flavor="hive"),
                         partition_base_dir=str(events_dir))
    ids = dataset.to_table(columns=["event_id"]).column("event_id").to_pylist()
    return len(ids), len(set(ids))
