"""Reads and writes env files (KEY=VALUE lines), such as `.headwater/stack.env`, and finds the running stack's: the
state directory, its endpoints and the pipeline's outputs, the same way for every command."""

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


# --- the running stack's configuration: the one reader every command uses ---------------------------------------
STATE_DIR_VAR = "HEADWATER_STATE_DIR"
DEFAULT_STATE_DIR = ".headwater"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the local stack keeps its state: HEADWATER_STATE_DIR, else `.headwater` in the current folder (the
    repository's root, where `make` and the documented commands run)."""
    env = os.environ if env is None else env
    return Path(env.get(STATE_DIR_VAR) or DEFAULT_STATE_DIR).resolve()


def stack_env_file(env: Mapping[str, str] | None = None) -> Path:
    """The running stack's endpoints: `<state dir>/stack.env`."""
    return state_dir(env) / "stack.env"


def pipeline_dir(env: Mapping[str, str] | None = None) -> str:
    """The pipeline's output root: HEADWATER_PIPELINE_DIR (a path or a Hadoop URI), else `<state dir>/pipeline`;
    the pipeline writes there and the console reads there."""
    env = os.environ if env is None else env
    return (env.get("HEADWATER_PIPELINE_DIR") or "").strip() or str(state_dir(env) / "pipeline")


def stack_settings(env_file: Path | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a command runs with: the stack's env file (`env_file`, else the state dir's; none is fine),
    overridden by the environment."""
    env = os.environ if env is None else env
    path = env_file or stack_env_file(env)
    return {**(read_env(path) if path.is_file() else {}), **env}
