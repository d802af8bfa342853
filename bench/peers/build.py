"""Builds the peer (Benthos v4.27.0, our main module in `benthos/`) once per go.mod/go.sum/main.go content.

`go install github.com/benthosdev/benthos/v4/cmd/benthos@v4.27.0` is refused (its go.mod has a `replace`), so
`benthos/main.go` imports the io, pure, pure/extended and kafka components and calls `service.RunCLI`. The
linker needs `-checklinkname=0`: an unused parquet dependency pulls a runtime symbol by `go:linkname`. The binary
is cached under ~/.cache/headwater/benthos/ (HEADWATER_PEERS_CACHE), named by the hash of the module's files.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

MODULE = Path(__file__).resolve().parent / "benthos"
SOURCES = ("go.mod", "go.sum", "main.go")
LDFLAGS = "-checklinkname=0"


class BuildError(RuntimeError):
    """Go is missing or the build failed (the message carries the end of go's output)."""


def source_hash(module: Path = MODULE) -> str:
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (module / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    raw = os.environ.get("HEADWATER_PEERS_CACHE")
    return Path(raw) if raw else Path.home() / ".cache" / "headwater" / "benthos"


def find_go() -> str:
    for candidate in (shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError("no Go toolchain found: run `make setup` (setup/setup-go.sh installs one)")


def ldflags(go_version: str) -> list[str]:
    """`-checklinkname=0` where the linker has it (Go >= 1.23, which also enforces go:linkname); none before."""
    found = re.search(r"go1\.(\d+)", go_version)
    return [f"-ldflags={LDFLAGS}"] if found is None or int(found.group(1)) >= 23 else []


def build(module: Path = MODULE, log: bool = True) -> Path:
    """The path of the peer binary, building it first when the cache has none for these sources."""
    target = cache_dir() / f"headwater-benthos-{source_hash(module)}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    if log:
        print(f"building Benthos v4.27.0 into {target} (the first build takes many minutes) ...", flush=True)
    go = find_go()
    version = subprocess.run([go, "version"], capture_output=True, text=True, check=False, env=env).stdout
    proc = subprocess.run([go, "build", "-trimpath", *ldflags(version), "-o", str(tmp), "."],
                          cwd=module, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise BuildError(f"go build failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}")
    tmp.replace(target)
    return target
