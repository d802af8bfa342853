"""The load test's settings: one frozen dataclass read once from the environment and validated.

Every variable is documented once, in loadtest/README.md ("Settings"). The gateway URL and write key default
to the ones in the stack's `stack.env` so that `make up && make loadtest` needs nothing else.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.envfile import read_env, stack_env_file, state_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STACK_ENV = stack_env_file()
DEFAULT_RUNS_DIR = state_dir() / "loadtest"
SHAPES = ("soak", "ramp", "spike", "steps")


class SettingsError(ValueError):
    """A load-test environment variable has a value that cannot be used; the message names it."""


def _number(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None
    if not (math.isfinite(value) and lo <= value <= hi):
        raise SettingsError(f"{name}={raw} is outside [{lo:g}, {hi:g}]")
    return value


def _ca_bundle(env: Mapping[str, str], stack: Mapping[str, str]) -> str:
    """HEADWATER_CA_BUNDLE (the environment's, else stack.env's: a secure stack's private CA), a readable file."""
    path = env.get("HEADWATER_CA_BUNDLE") or stack.get("HEADWATER_CA_BUNDLE", "")
    if path and not os.access(path, os.R_OK):
        raise SettingsError(f"HEADWATER_CA_BUNDLE={path!r} is not a readable file")
    return path


def _integer(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    value = _number(env, name, default, lo, hi)
    if value != int(value):
        raise SettingsError(f"{name}={env[name]} is not an integer")
    return int(value)


@dataclass(frozen=True)
class LoadSettings:
    """What to send, how fast, for how long, and where the run's records go."""

    gateway_url: str
    write_key: str
    run_id: str
    run_dir: Path
    nodes: int = 1000
    rate: float = 4.0               # events per node per second
    batch_events: int = 40          # events per batch (protocol limit 40)
    users: int = 100                # locust users = concurrent connections, over all workers
    workers: int = 1                # worker processes sharing the nodes (1 = local run)
    duration_s: float = 60.0
    shape: str = "soak"
    spawn_rate: float = 50.0        # users started per second by the shapes
    zstd_level: int = 3
    seed: int = 7
    ca_bundle: str = ""             # a PEM file of CA certificates for an https gateway ("": the system store)

    @property
    def interval_s(self) -> float:
        """Seconds between two batches of one node: batch_events / rate."""
        return self.batch_events / self.rate

    @property
    def offered_events_per_s(self) -> float:
        return self.nodes * self.rate

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LoadSettings:
        env = os.environ if env is None else env
        stack_path = Path(env.get("HEADWATER_LT_STACK_ENV") or DEFAULT_STACK_ENV)
        stack = read_env(stack_path) if stack_path.is_file() else {}
        gateway = env.get("GATEWAY_URL") or stack.get("GATEWAY_URL", "")
        key = env.get("HEADWATER_WRITE_KEY") or stack.get("HEADWATER_WRITE_KEY", "")
        if not gateway:
            raise SettingsError(f"GATEWAY_URL is not set and {stack_path} has none (run `make up` first)")
        if not key:
            raise SettingsError(f"HEADWATER_WRITE_KEY is not set and {stack_path} has none")
        run_id = env.get("HEADWATER_LT_RUN_ID") or str(uuid.uuid4())
        try:
            uuid.UUID(run_id)
        except ValueError:
            raise SettingsError(f"HEADWATER_LT_RUN_ID={run_id!r} is not a UUID") from None
        runs = Path(env.get("HEADWATER_LT_RUNS_DIR") or DEFAULT_RUNS_DIR)
        shape = env.get("HEADWATER_LT_SHAPE", "soak") or "soak"
        if shape not in SHAPES:
            raise SettingsError(f"HEADWATER_LT_SHAPE={shape!r} is not one of {', '.join(SHAPES)}")
        settings = cls(
            gateway_url=gateway.rstrip("/"),
            write_key=key,
            run_id=run_id,
            run_dir=runs / run_id,
            nodes=_integer(env, "HEADWATER_LT_NODES", 1000, 1, 10_000_000),
            rate=_number(env, "HEADWATER_LT_RATE", 4.0, 1e-6, 1e6),
            batch_events=_integer(env, "HEADWATER_LT_BATCH", 40, 1, 40),
            users=_integer(env, "HEADWATER_LT_USERS", 100, 1, 100_000),
            workers=_integer(env, "HEADWATER_LT_WORKERS", 1, 1, 1024),
            duration_s=_number(env, "HEADWATER_LT_DURATION_S", 60.0, 1.0, 7 * 86400.0),
            shape=shape,
            spawn_rate=_number(env, "HEADWATER_LT_SPAWN_RATE", 50.0, 0.1, 1e6),
            zstd_level=_integer(env, "HEADWATER_LT_ZSTD_LEVEL", 3, 1, 19),
            seed=_integer(env, "HEADWATER_LT_SEED", 7, 0, 2**31),
            ca_bundle=_ca_bundle(env, stack),
        )
        if settings.users > settings.nodes:
            raise SettingsError(f"HEADWATER_LT_USERS={settings.users} exceeds HEADWATER_LT_NODES={settings.nodes}: "
                                "every user (connection) needs at least one node")
        return settings
