"""What the console reads from the pipeline's output root: the live query's checkpoint offsets (for its lag) and
the loss audit's Parquet output (open gaps). Local paths only; on a cluster, point it at a mounted copy."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LIVE_QUERY = "aggregates_live"
# The live query triggers as soon as records arrive (a few seconds per batch on a small host): a minute without a
# batch is not a running pipeline under load.
IDLE_S = 60.0


def checkpoint_offsets(pipeline_dir: Path, topic: str, query: str = LIVE_QUERY, *,
                       committed: bool = False) -> dict[int, int] | None:
    """The offsets of `topic` in the query's newest offset log entry (the end of its newest batch); with
    `committed`, of its newest committed batch (every record before them is in the query's output)."""
    folder = pipeline_dir / "checkpoints" / query / "offsets"
    try:
        entries = sorted((int(p.name), p) for p in folder.iterdir() if p.name.isdigit())
        if committed:
            done = {int(p.name) for p in (folder.parent / "commits").iterdir() if p.name.isdigit()}
            entries = [(n, p) for n, p in entries if n in done]
    except OSError:
        return None
    for _, path in reversed(entries):
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines[2:]:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and topic in doc:
                return {int(p): int(o) for p, o in doc[topic].items()}
    return None


def last_batch_at(pipeline_dir: Path, query: str = LIVE_QUERY) -> float | None:
    """When the query last committed a batch (epoch seconds: its newest commit log entry's mtime), or None."""
    folder = pipeline_dir / "checkpoints" / query / "commits"
    try:
        return max((p.stat().st_mtime for p in folder.iterdir() if p.name.isdigit()), default=None)
    except OSError:
        return None


def pipeline_health(committed: dict[int, int] | None, unread: int | None, batch_age_s: float | None) -> str:
    """What the header says of the pipeline (pure): `ok` only while its live query commits batches. A checkpoint
    says it ran once, not that it runs: with no batch for IDLE_S it is idle (stopped, or no new events), and with
    records waiting it is stopped or stalled."""
    if committed is None:
        return "no checkpoint yet"
    if batch_age_s is None or batch_age_s > IDLE_S:
        ago = "no batch committed" if batch_age_s is None else f"last batch {batch_age_s:.0f} s ago"
        if unread:
            return f"stopped or stalled: {unread} records unread, {ago}"
        return f"idle: {ago} (stopped, or no new events)"
    return "ok"


def lag(end: dict[int, int], committed: dict[int, int] | None) -> int | None:
    """Records of the topic the query has not read yet; None when the pipeline has no checkpoint."""
    if committed is None or not end:
        return None
    return sum(max(0, e - committed.get(p, 0)) for p, e in end.items())


@dataclass
class LossAudit:
    """Per producer: reported missing, arrived late, still missing; and the total still missing."""

    producers: list[dict[str, Any]] = field(default_factory=list)
    still_missing: int = 0
    rows: int = 0
    error: str | None = None


def net_loss(rows: list[dict[str, Any]]) -> LossAudit:
    """The streaming audit's rows summed per producer (missing - arrived_late), open gaps first (pure)."""
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        p = per.setdefault(str(r["producer_id"]), {"producer_id": str(r["producer_id"]), "reported": 0,
                                                  "arrived_late": 0, "gaps": []})
        if r["status"] == "arrived_late":
            p["arrived_late"] += int(r["missing"])
        else:
            p["reported"] += int(r["missing"])
            p["gaps"].append([int(r["first_seq"]), int(r["last_seq"])])
    out = []
    for p in per.values():
        p["still_missing"] = p["reported"] - p["arrived_late"]
        p["gaps"] = sorted(p["gaps"])[:10]
        out.append(p)
    out.sort(key=lambda p: (-p["still_missing"], p["producer_id"]))
    return LossAudit(out[:50], sum(max(0, p["still_missing"]) for p in out), len(rows))


def has_data_files(folder: Path) -> bool:
    """Whether a Spark Parquet output holds a data file yet (its `_spark_metadata` log exists from the first batch
    on; a healthy audit with no gap writes no file at all)."""
    return any(not any(part.startswith(("_", ".")) for part in p.relative_to(folder).parts)
               for p in folder.rglob("*.parquet"))


def read_loss_audit(pipeline_dir: Path) -> LossAudit:
    folder = pipeline_dir / "loss_audit"
    if not folder.is_dir() or not has_data_files(folder):
        return LossAudit()
    try:
        import pyarrow.dataset as ds  # type: ignore[import-untyped]  # noqa: PLC0415 - heavy, only here

        table = ds.dataset(folder, format="parquet", partitioning="hive").to_table(
            columns=["producer_id", "first_seq", "last_seq", "missing", "status"])
        return net_loss(table.to_pylist())
    except Exception as exc:  # a file being written, a format change: shown, retried next time
        return LossAudit(error=f"{type(exc).__name__}: {exc}")
