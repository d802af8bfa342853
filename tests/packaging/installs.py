"""Test helpers: a deployable installed from its own package into a fresh virtualenv, with no repository on its path.

Only the folders a package names (itself and `../common`, ...) are copied to a temporary tree, so the install
cannot read anything else of the repository; pip installs the pinned third-party versions (constraints.txt)
from the warm cache. Processes run from an empty folder with a clean PYTHONPATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Installed", "install"]

REPO_ROOT = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", ".mypy_cache")


@dataclass(frozen=True)
class Installed:
    """A virtualenv holding one deployable, and an empty folder to run its commands from."""

    venv: Path
    workdir: Path

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment less any Python path or virtualenv, with the venv's bin first on PATH."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYSPARK"))}
        return {**base, "PATH": f"{self.venv / 'bin'}:{base.get('PATH', '')}", **(extra or {})}

    def run(self, *args: str | Path, timeout: float = 120, extra: Mapping[str, str] | None = None) -> str:
        """Run a command from the empty folder; its stdout, or AssertionError with its output."""
        done = subprocess.run([str(a) for a in args], cwd=self.workdir, env=self.env(extra), capture_output=True,
                              text=True, timeout=timeout, check=False)
        assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout


def install(tmp: Path, project: str, *siblings: str) -> Installed:
    """Copy `project` (a folder with a pyproject.toml) and `siblings` to `tmp/src`, create `tmp/venv` and pip
    install the project there (pinned by constraints.txt)."""
    src = tmp / "src"
    for folder in (project, *siblings):
        shutil.copytree(REPO_ROOT / folder, src / folder, ignore=IGNORED)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    workdir = tmp / "empty"
    workdir.mkdir()
    installed = Installed(venv, workdir)
    # --no-compile: no byte-compiling of every installed module up front (pyspark alone has thousands); Python
    # compiles what a command imports when it imports it, as it would on a host that installed without.
    installed.run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
                  "-c", REPO_ROOT / "constraints.txt", src / project, timeout=600)
    return installed
