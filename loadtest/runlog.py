"""A run's records on disk: the manifest (what ran, from when) and one ack file per locust process.

Every acknowledged event is appended as `producer_id<TAB>seq<TAB>event_id` to `acks-<worker>-<pid>.tsv` in the
run's folder; the reconciliation reads them all back. Files are written through a buffer flushed every
`flush_every` lines and at the end, so a crash loses at most that many acknowledgements from the record (never
from Kafka), which would only make the reconciliation less strict.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

MANIFEST = "run.json"
AckKey = tuple[str, int]  # (producer_id, seq)


@dataclass(frozen=True)
class Manifest:
    """What the reconciliation needs to know about a run."""

    run_id: str
    started_at_ms: int
    nodes: int
    rate: float
    batch_events: int
    users: int
    workers: int
    duration_s: float
    shape: str
    gateway_url: str

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / MANIFEST
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, run_dir: Path) -> Manifest:
        raw = json.loads((run_dir / MANIFEST).read_text())
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__})


class AckLog:
    """Appends acknowledged events of one process to its own file in the run folder."""

    def __init__(self, run_dir: Path, worker: int, flush_every: int = 5000) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / f"acks-{worker}-{os.getpid()}.tsv"
        self._file: IO[str] = self.path.open("a", encoding="ascii")
        self._lines: list[str] = []
        self._flush_every = flush_every
        self.count = 0

    def record(self, producer_id: str, events: Iterable[tuple[int, str]]) -> None:
        for seq, event_id in events:
            self._lines.append(f"{producer_id}\t{seq}\t{event_id}\n")
            self.count += 1
        if len(self._lines) >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        if self._lines:
            self._file.write("".join(self._lines))
            self._lines.clear()
        self._file.flush()

    def close(self) -> None:
        self.flush()
        self._file.close()


def read_acks(run_dir: Path) -> Iterator[tuple[str, int, str]]:
    """Every (producer_id, seq, event_id) recorded in the run folder, file by file."""
    for path in sorted(run_dir.glob("acks-*.tsv")):
        with path.open(encoding="ascii") as lines:
            for line in lines:
                if not line.strip():
                    continue
                pid, seq, eid = line.rstrip("\n").split("\t")
                yield pid, int(seq), eid
