"""`python -m tests.support.chunk NAME COMMAND...`: runs one chunk of `make test` and appends `NAME SECONDS STATUS`
to the chunk log named by HEADWATER_TEST_CHUNKS (the folder-times plugin puts those lines above its table)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CHUNKS_ENV = "HEADWATER_TEST_CHUNKS"


def read_chunks(path: Path) -> list[tuple[str, float, int]]:
    """The chunks logged so far: (name, seconds, exit status); lines that do not parse are skipped."""
    chunks = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            try:
                chunks.append((parts[0], float(parts[1]), int(parts[2])))
            except ValueError:
                continue
    return chunks


def run(name: str, command: list[str], log: Path | None) -> int:
    """Run `command`, log its seconds under `name` (when a log is given); its exit status."""
    started = time.monotonic()
    status = subprocess.call(command)
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as out:
            out.write(f"{name} {time.monotonic() - started:.1f} {status}\n")
    return status


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m tests.support.chunk NAME COMMAND...", file=sys.stderr)
        return 2
    log = os.environ.get(CHUNKS_ENV)
    return run(argv[0], argv[1:], Path(log) if log else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
