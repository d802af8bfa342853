"""Reconciliation: proves every event acknowledged to locust is in Kafka, by producer_id and seq.

    python -m loadtest.reconcile <run folder> [--stack-env .headwater/stack.env]

Reads the run's manifest and ack files, scans the events topic (read_committed) from the run's start, and
prints acknowledged / found / missing / duplicates. Exits 1 if any acknowledged event is missing or stored
under another event_id, 0 otherwise. Duplicates (a retry whose answer was lost) are reported, not failed:
the pipeline removes them by event_id.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from common.envfile import read_env
from common.kafka_security import KafkaSecurity
from common.registry_access import RegistryAccess
from loadtest.kafka_scan import Found, scan
from loadtest.nodes import producer_id
from loadtest.runlog import AckKey, Manifest, read_acks
from loadtest.settings import DEFAULT_STACK_ENV

CLOCK_MARGIN_MS = 5000  # records are timestamped by the gateway's clock; scan a little before the run start


@dataclass(frozen=True)
class Report:
    """The reconciliation's counts (each an event count)."""

    acknowledged: int
    found: int
    missing: int
    duplicates: int
    id_mismatches: int
    unacknowledged_found: int
    records_scanned: int
    mean_value_bytes: float
    producers_acknowledged: int  # distinct nodes with at least one acknowledged event
    seq_gaps: int  # seqs absent from Kafka below a producer's highest stored seq (a lost, unacknowledged batch)

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.id_mismatches == 0


class Tally:
    """Matches acknowledged events against stored ones; pure, fed from any source."""

    def __init__(self) -> None:
        self.acked: dict[AckKey, str] = {}
        self._seen: dict[AckKey, str] = {}
        self._duplicates = 0
        self._mismatches = 0
        self._records = 0
        self._bytes = 0

    def ack(self, producer: str, seq: int, event_id: str) -> None:
        self.acked[(producer, seq)] = event_id

    def stored(self, found: Found) -> None:
        key = (found.producer_id, found.seq)
        self._records += 1
        self._bytes += found.value_bytes
        if found.header_event_id and found.header_event_id != found.event_id:
            self._mismatches += 1  # the header and the record disagree: a gateway bug
        first = self._seen.get(key)
        if first is None:
            self._seen[key] = found.event_id
            return
        self._duplicates += 1
        if first != found.event_id:
            self._mismatches += 1  # one seq stored under two event ids: a producer bug

    def report(self) -> Report:
        found = mismatched = 0
        for key, event_id in self.acked.items():
            stored = self._seen.get(key)
            if stored is None:
                continue
            found += 1
            mismatched += stored != event_id
        return Report(
            acknowledged=len(self.acked), found=found, missing=len(self.acked) - found,
            duplicates=self._duplicates, id_mismatches=self._mismatches + mismatched,
            unacknowledged_found=sum(1 for key in self._seen if key not in self.acked),
            records_scanned=self._records, mean_value_bytes=self._bytes / self._records if self._records else 0.0,
            producers_acknowledged=len({producer for producer, _ in self.acked}),
            seq_gaps=_gaps(self._seen),
        )


def _gaps(seen: dict[AckKey, str]) -> int:
    """Per producer, how many seqs below its highest stored one are not stored (0 when every seq is there)."""
    highest: dict[str, int] = {}
    count: dict[str, int] = {}
    for producer, seq in seen:
        highest[producer] = max(highest.get(producer, -1), seq)
        count[producer] = count.get(producer, 0) + 1
    return sum(highest[p] + 1 - count[p] for p in highest)


def reconcile(run_dir: Path, stack_env: dict[str, str], found: Iterable[Found] | None = None) -> Report:
    """Count a run; `found` defaults to scanning the stack's events topic."""
    manifest = Manifest.read(run_dir)
    tally = Tally()
    for pid, seq, eid in read_acks(run_dir):
        tally.ack(pid, seq, eid)
    if found is None:
        producers = {producer_id(manifest.run_id, i) for i in range(manifest.nodes)}
        found = scan(stack_env["KAFKA_BOOTSTRAP"], stack_env.get("EVENTS_TOPIC", "headwater.events"),
                     stack_env["REGISTRY_URL"], since_ms=manifest.started_at_ms - CLOCK_MARGIN_MS, producers=producers,
                     security=KafkaSecurity.from_env(stack_env, "LOADTEST"),
                     access=RegistryAccess.from_env(stack_env, "LOADTEST"))
    for record in found:
        tally.stored(record)
    return tally.report()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.reconcile", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="the run's folder (holds run.json and acks-*.tsv)")
    parser.add_argument("--stack-env", type=Path, default=DEFAULT_STACK_ENV,
                        help="stack.env with KAFKA_BOOTSTRAP, REGISTRY_URL, EVENTS_TOPIC")
    args = parser.parse_args(argv)
    started = time.monotonic()
    report = reconcile(args.run_dir, read_env(args.stack_env))
    (args.run_dir / "reconcile.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    print(f"run {args.run_dir.name}: acknowledged {report.acknowledged}, found {report.found}, "
          f"missing {report.missing}, duplicates {report.duplicates}, id mismatches {report.id_mismatches}, "
          f"unacknowledged but stored {report.unacknowledged_found}, "
          f"{report.producers_acknowledged} distinct nodes acknowledged, {report.seq_gaps} seq gaps in Kafka "
          f"({report.records_scanned} records scanned in {time.monotonic() - started:.1f}s, "
          f"mean value {report.mean_value_bytes:.0f} bytes)")
    print("OK: every acknowledged event is in Kafka" if report.ok else "FAIL: acknowledged events are missing")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
