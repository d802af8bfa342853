"""The demo's Spark pipeline: a child process whose console-sink tables are shown on this terminal, and the wait
until its queries run (however long Spark takes to start on a busy host), with progress shown."""

from __future__ import annotations

import ctypes
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TextIO

STARTED = re.compile(rb"started query (\S+)")


class PipelineExited(RuntimeError):
    """The pipeline ended before its queries ran; the message says where its log is."""


def die_with_parent() -> None:
    """In the pipeline's child process: get SIGTERM if the demo dies (a crash must not orphan a Spark job)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class PipelineOutput:
    """Copies the pipeline's output to a log file, shows the console sink's tables on `out`, and notes which
    queries have started.

    Spark writes the console sink's tables among its own log lines; only the tables are worth a reader's eye,
    with Spark's note when a table was cut ("only showing top N rows").
    """

    TABLE_PREFIXES = (b"|", b"+", b"Batch: ", b"-------", b"only showing")

    def __init__(self, stream: IO[bytes], log_path: Path, out: TextIO | None = None) -> None:
        self.queries: set[str] = set()
        self.tables = 0  # console-sink tables shown so far that hold at least one row
        self._cells = 0  # `|` lines of the table being printed (its header, then its rows)
        self.ended = False
        self.changed = threading.Condition()
        self._out = out or sys.stdout
        self._thread = threading.Thread(target=self._copy, args=(stream, log_path), daemon=True)
        self._thread.start()

    def _copy(self, stream: IO[bytes], log_path: Path) -> None:
        with open(log_path, "ab") as log:
            for line in iter(stream.readline, b""):
                log.write(line)
                log.flush()  # the user may follow the log while Spark starts
                if line.startswith(self.TABLE_PREFIXES):
                    self._out.write(line.decode(errors="replace"))
                    self._out.flush()
                    if line.startswith(b"Batch: "):
                        self._cells = 0
                    elif line.startswith(b"|"):
                        self._cells += 1
                        if self._cells == 2:  # the header and a first row: a table of data, not an empty batch
                            with self.changed:
                                self.tables += 1
                                self.changed.notify_all()
                elif match := STARTED.search(line):
                    with self.changed:
                        self.queries.add(match.group(1).decode(errors="replace"))
                        self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def wait_running(self, expected: Sequence[str], say: Callable[[str], None], *,
                     progress_every_s: float = 15.0) -> float:
        """Block until every query of `expected` has started, however long that takes, saying every
        `progress_every_s` how far it is; PipelineExited if the pipeline's output ends first. Returns the seconds
        waited."""
        return self._wait(lambda: set(expected) <= self.queries,
                          lambda: f"{len(set(expected) & self.queries)} of {len(expected)} queries started",
                          say, progress_every_s)

    def wait_table(self, tables: int, say: Callable[[str], None], *, progress_every_s: float = 15.0) -> float:
        """Block until the console sink has shown `tables` tables with at least one row (an empty first batch does
        not count; the first with data comes once Spark has planned and run a batch of the events: minutes on a
        busy host), saying so meanwhile; PipelineExited as above."""
        return self._wait(lambda: self.tables >= tables, lambda: f"{self.tables} of {tables} live tables shown",
                          say, progress_every_s)

    def _wait(self, done: Callable[[], bool], progress: Callable[[], str], say: Callable[[str], None],
              progress_every_s: float) -> float:
        clock = time.monotonic
        t0 = clock()
        next_say = t0 + progress_every_s
        with self.changed:
            while not done():
                if self.ended:
                    raise PipelineExited("the pipeline exited before its queries ran")
                self.changed.wait(max(0.0, min(progress_every_s, next_say - clock())))
                if clock() >= next_say:
                    say(f"waiting for the pipeline: {progress()} after {clock() - t0:.0f} s (Spark is slow on a "
                        "busy host; Ctrl-C gives up)")
                    next_say = clock() + progress_every_s
        return clock() - t0

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)


def wait_caught_up(committed: Callable[[], dict[int, int] | None], end: dict[int, int], alive: Callable[[], bool],
                   say: Callable[[str], None], *, progress_every_s: float = 15.0, poll_s: float = 1.0) -> float:
    """Block until the live query has committed every record before `end` (partition -> offset: the events topic's
    end once the producers stopped), saying how far behind it is; PipelineExited if it stops first."""
    t0 = time.monotonic()
    next_say = t0 + progress_every_s
    while True:
        done = committed() or {}
        behind = sum(max(0, offset - done.get(p, 0)) for p, offset in end.items())
        if behind == 0:
            return time.monotonic() - t0
        if not alive():
            raise PipelineExited(f"the pipeline exited with {behind} events unread")
        if time.monotonic() >= next_say:
            say(f"waiting for the pipeline to read the last {behind} events ({time.monotonic() - t0:.0f} s)")
            next_say = time.monotonic() + progress_every_s
        time.sleep(poll_s)  # the condition is a file Spark writes: looked at once a second


def stop(pipeline: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    """SIGINT (the pipeline stops its queries cleanly), SIGKILL after `timeout_s`."""
    if pipeline.poll() is None:
        pipeline.send_signal(signal.SIGINT)
        try:
            pipeline.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pipeline.kill()
            pipeline.wait()
