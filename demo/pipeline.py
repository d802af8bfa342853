"""The demo's Spark pipeline: a child process whose console-sink tables are shown on this terminal."""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
from pathlib import Path
from typing import IO


def die_with_parent() -> None:
    """In the pipeline's child process: get SIGTERM if the demo dies (a crash must not orphan a Spark job)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class PipelineOutput:
    """Copies the pipeline's stderr to a log file and shows the console sink's tables on this terminal.

    Spark writes the console sink's tables among its own log lines; only the tables are worth a reader's eye.
    """

    TABLE_PREFIXES = (b"|", b"+", b"Batch: ", b"-------")

    def __init__(self, stream: IO[bytes], log_path: Path) -> None:
        self.started = threading.Event()
        self._thread = threading.Thread(target=self._copy, args=(stream, log_path), daemon=True)
        self._thread.start()

    def _copy(self, stream: IO[bytes], log_path: Path) -> None:
        with open(log_path, "ab") as log:
            for line in iter(stream.readline, b""):
                log.write(line)
                if line.startswith(self.TABLE_PREFIXES):
                    sys.stdout.write(line.decode(errors="replace"))
                    sys.stdout.flush()
                elif b"started query" in line and not self.started.is_set():
                    self.started.set()
                    print("pipeline queries started", flush=True)

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)
