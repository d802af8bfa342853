"""The cluster recipe of docs/spark-pipeline.md as the tests run it: its command lines read from the page (the block
after the `cluster-recipe` marker), run with bash from the repository root, as a user would type them."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "spark-pipeline.md"
MARKER = "<!-- cluster-recipe:"
ENTRY = "dist/pipeline/headwater_pipeline_main.py"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without what would leak the checkout or the test stack into Spark."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHONPATH", "PYSPARK", "SPARK_", "HEADWATER_", "KAFKA_", "REGISTRY_"))}
    return {**env, **(extra or {})}


def offsets_json(topic: str, offsets: Mapping[int, int]) -> str:
    """Spark's per-partition offsets JSON for `topic`."""
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def spark_processes(state: Path) -> list[int]:
    """Pids of live processes whose command line names the cluster's folder (none after `down`)."""
    marker = str(state.resolve() / "spark")
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            zombie = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            continue
        if marker in cmdline and not zombie:
            pids.append(int(entry.name))
    return pids


@dataclass(frozen=True)
class Recipe:
    """The recipe's lines: those before spark-submit (`start`), spark-submit (`submit`), those after (`stop`);
    `prelude` (the virtualenv's activation, exports) goes before each part as the shell keeps it for the next lines."""

    state: Path
    prelude: list[str]
    start: list[str]
    submit: str
    stop: list[str]

    @classmethod
    def from_doc(cls, state: Path, doc: Path = DOC) -> Recipe:
        text = doc.read_text()
        assert MARKER in text, f"{doc} has no {MARKER!r} block"
        block = text.split(MARKER, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
        lines = [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
        at = next(i for i, line in enumerate(lines) if line.startswith("spark-submit "))
        prelude = [line for line in lines if "bin/activate" in line or line.startswith("export ")]
        return cls(state, prelude, lines[:at], lines[at], lines[at + 1:])

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return clean_env({"HEADWATER_STATE_DIR": str(self.state), **(extra or {})})

    def run(self, lines: str | list[str], extra: Mapping[str, str] | None = None, timeout: float = 900) -> str:
        """Run `lines` with bash (stop at the first failure) from the repository root; return stdout."""
        script = self.script(lines)
        done = subprocess.run(["bash", "-c", script], cwd=REPO_ROOT, env=self.env(extra), capture_output=True,
                              text=True, timeout=timeout, check=False)
        assert done.returncode == 0, (f"{script}\nexited {done.returncode}:\n{done.stdout[-3000:]}\n"
                                     f"{done.stderr[-5000:]}")
        return done.stdout

    def script(self, lines: str | list[str]) -> str:
        """A bash script of `lines` after the prelude, stopping at the first failure."""
        body = lines if isinstance(lines, list) else [lines]
        return "\n".join(["set -euo pipefail", *self.prelude, *(line for line in body if line not in self.prelude)])

    def submit_with(self, *args: str) -> str:
        """The recipe's spark-submit command with other pipeline arguments (`run`, or a replay's offsets)."""
        assert ENTRY in self.submit, self.submit
        return self.submit.split(ENTRY, 1)[0] + ENTRY + " " + " ".join(shlex.quote(a) for a in args)

    @staticmethod
    def summary(stdout: str) -> dict[str, int]:
        """The replay's closing JSON line: row counts per output."""
        lines = [line for line in stdout.splitlines() if line.startswith('{"replay"')]
        assert lines, stdout[-3000:]
        counts: dict[str, int] = {k: v for k, v in json.loads(lines[-1]).items() if k != "replay"}
        return counts
