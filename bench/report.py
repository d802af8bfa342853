"""Turns the benchmarks' JSON lines into docs/benchmarks/: one dated Markdown table per run, and an index.

    python -m bench.report                         # regenerate docs/benchmarks/*.md from docs/benchmarks/runs/
    python -m bench.report --add out.log [--bench spark] [--date 2026-11-23] [--note "..."]

Runs live in `docs/benchmarks/runs/<bench>.jsonl`, one JSON object per line, each with `bench` and `date`
(UTC, YYYY-MM-DD) and any figures, nested objects and lists of objects included. `--add` takes the JSON object
lines a benchmark printed (`make bench | tee out.log`; other lines are skipped), labels them (`--bench` when
the line has no `bench` key; today when no `date`) and appends them before regenerating. Nothing is measured
here: the tables only show what a run printed, ratios included.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
RUN_PAGE = re.compile(r"\d{4}-\d{2}-\d{2}-[a-z0-9_-]+-\d+\.md")  # what `generate` writes
DATED_PAGE = "20??-??-??-*.md"  # a run's page, or a note written by hand (any other dated name)
INTRO = """# Benchmarks

One page per benchmark run, generated with this index by `python -m bench.report` (`make benchmarks-doc`) from
the JSON lines in `runs/`: never edit those pages (`<date>-<bench>-<n>.md`) or this index by hand. A dated page
whose name ends in a word instead (`-runs`, `-optimisations`) is a note written by hand (several runs of a test,
or a log of changes, each measured as it says): the index lists it, marked so, and regenerating leaves it as it
is. To add a run: `make bench | tee out.log`, then `python -m bench.report --add out.log` (add `--bench spark`
for `make bench-spark`, whose line has no `bench` key). Read the ratios measured within one run (a figure
against its own bound, side by side); absolute figures on the shared 2-core machines these ran on move by tens
of percent between runs.

- `gateway` (`make bench`): the gateway's events/s over HTTP against its in-process bound, JSON and Avro
  paths, and the ack latency at half that load.
- `gateway-variants` (`python -m bench.gateway.variants`): A/B of the gateway's tuning variables in one run
  (CPU per event of the gateway and the broker, latency at one rate); the log of what each change bought is
  [2026-11-24-gateway-optimisations](2026-11-24-gateway-optimisations.md).
- `spark` (`make bench-spark`): the pipeline's decode and aggregate throughput against the Kafka read bound,
  and the created_at -> aggregate latency.
- `replication` (`make bench-replication`): the same SDK load through HAProxy to RF=1 and RF=3 topics of the
  cluster profile, events per gateway and per broker core-second, and their ratio (docs/cluster.md).
- `loadtest-*` (`make loadtest`, `python -m loadtest.curve`, `.capacity`, `.connections`): the
  100,000-node soak with its reconciliation, the capacity curve and plan, the cost of connections
  (`loadtest/README.md`).
- `peers` (`make bench-peers`): the gateway beside a native peer on the same broker, cores per 10 k events/s
  (docs/capacity.md).
- `rules` (`make bench-rules`): streaming SQL rules' latency and the pipeline's throughput with N rules
  (docs/rules-runtime.md).
- `subscribe`, `subscribe-fanout` (`make bench-subscribe`, `python -m bench.subscribe.fanout`): subscribers'
  latency and the subscription server's cost (docs/subscriptions.md).
- `tls` (`make bench-tls`): CPU per event over plain HTTP and over TLS (docs/security.md).
- `sdk_network_python`, `sdk_network_go`, `sdk_network_node` (`sdk-python/bench/bench_network.py`,
  `cd sdk-go/bench && go run ./network`, `node sdk-typescript/bench/run.mjs`): each SDK beside its language's
  peers on a link of 1, 50 and 100 ms, events/s, connections, CPU per event, and 2,000 events across a 10 s
  outage (the SDKs' READMEs).

## Pages, newest first

"""


class ReportError(ValueError):
    """A run line is not usable (no bench name or date); the message names the file and line."""


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested objects as dotted keys; lists of scalars kept as lists (lists of objects are left to `tables`)."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            out.update(flatten(item, name + "."))
        elif not (isinstance(item, list) and item and all(isinstance(i, dict) for i in item)):
            out[name] = item
    return out


def cell(value: Any) -> str:
    """One table cell: integers with thousands separators, floats to 4 significant digits."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(cell(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(run: dict[str, Any]) -> str:
    """The Markdown page of one run: its scalar figures, then one table per list of objects."""
    lines = [f"# {run['bench']}, {run['date']}", ""]
    if run.get("note"):
        lines += [str(run["note"]), ""]
    figures = {k: v for k, v in flatten(run).items() if k not in ("bench", "date", "note")}
    lines += ["| figure | value |", "| --- | --- |", *[f"| `{k}` | {cell(v)} |" for k, v in figures.items()], ""]
    for key, items in _lists_of_objects(run):
        rows = [flatten(i) for i in items]
        columns = list(dict.fromkeys(c for r in rows for c in r))
        lines += [f"## {key}", "", "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
        lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def _lists_of_objects(value: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, list[dict[str, Any]]]]:
    for key, item in value.items():
        if isinstance(item, dict):
            yield from _lists_of_objects(item, f"{prefix}{key}.")
        elif isinstance(item, list) and item and all(isinstance(i, dict) for i in item):
            yield f"{prefix}{key}", item


def read_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """Every run of every `<bench>.jsonl`, checked."""
    runs = []
    for path in sorted(runs_dir.glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            run = json.loads(line)
            if not isinstance(run, dict) or not _NAME.fullmatch(str(run.get("bench", ""))):
                raise ReportError(f"{path}:{n}: no valid `bench` name")
            if not _DATE.fullmatch(str(run.get("date", ""))):
                raise ReportError(f"{path}:{n}: `date` must be YYYY-MM-DD")
            runs.append(run)
    return runs


def natural(name: str) -> list[Any]:
    """A sort key that orders the numbers in `name` by value: peers-9 before peers-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def generate(docs: Path = DOCS) -> list[Path]:
    """Write one page per run (`<date>-<bench>-<n>.md`) and the index README.md; remove stale pages."""
    runs = read_runs(docs / "runs")
    pages: dict[str, str] = {}
    counts: dict[tuple[str, str], int] = {}
    for run in runs:
        key = (str(run["date"]), str(run["bench"]))
        counts[key] = counts.get(key, 0) + 1
        pages[f"{key[0]}-{key[1]}-{counts[key]}.md"] = render(run)
    for stale in docs.glob(DATED_PAGE):
        if stale.name not in pages and RUN_PAGE.fullmatch(stale.name):  # hand-written notes stay
            stale.unlink()
    written = []
    for name, text in pages.items():
        (docs / name).write_text(text)
        written.append(docs / name)
    notes = {p.name for p in docs.glob(DATED_PAGE)} - set(pages)
    (docs / "README.md").write_text(INTRO + "\n".join(index_lines(set(pages), notes)) + "\n")
    return written


def index_lines(runs: set[str], notes: set[str]) -> list[str]:
    """One line per dated page, newest first (by name, numbers by value); notes written by hand say so."""
    return [f"- [{name[:-3]}]({name})" + (" (written by hand)" if name in notes else "")
            for name in sorted(runs | notes, key=natural, reverse=True)]


def add(log: Path, bench: str | None, date: str | None, note: str | None, docs: Path = DOCS) -> int:
    """Append the JSON object lines of a benchmark's output to runs/<bench>.jsonl; how many were added."""
    added = 0
    for line in log.read_text().splitlines():
        try:
            run = json.loads(line)
        except ValueError:
            continue
        if not isinstance(run, dict):
            continue
        run = {"bench": run.get("bench") or bench, "date": date or dt.datetime.now(dt.UTC).date().isoformat(),
               **({"note": note} if note else {}), **{k: v for k, v in run.items() if k != "bench"}}
        if not _NAME.fullmatch(str(run["bench"] or "")):
            raise ReportError(f"{log}: a line has no `bench` key: pass --bench")
        with (docs / "runs" / f"{run['bench']}.jsonl").open("a") as fh:
            fh.write(json.dumps(run) + "\n")
        added += 1
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--add", type=Path, help="a benchmark's output; its JSON object lines become runs")
    parser.add_argument("--bench", help="bench name for lines without a `bench` key")
    parser.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--note", help="a sentence shown above the run's table")
    args = parser.parse_args(argv)
    try:
        if args.add:
            print(f"added {add(args.add, args.bench, args.date, args.note)} run(s)")
        print(f"wrote {len(generate())} run page(s) and {DOCS / 'README.md'}")
    except (ReportError, OSError, ValueError) as exc:
        print(f"bench.report: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
