"""Reads and writes env files (KEY=VALUE lines), such as `.headwater/stack.env`: the endpoints of a running stack."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def write_env(path: Path, values: Mapping[str, str]) -> None:
    """Write atomically (a reader never sees half a file), readable by its owner only (mode 0600: an env file
    may hold a write key), whatever the umask and whatever mode an older file had."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        os.fchmod(out.fileno(), 0o600)  # a .tmp left by an older writer may have had a wider mode
        out.write("".join(f"{k}={v}\n" for k, v in values.items()))
    os.replace(tmp, path)


def read_env(path: Path) -> dict[str, str]:
    """Parse KEY=VALUE lines; blank lines and `#` comments are skipped."""
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"{path}: line {line!r} is not KEY=VALUE")
        values[key.strip()] = value.strip()
    return values
