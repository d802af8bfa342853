"""The private stack a benchmark starts: the local stack's settings, in a state directory of its own, on free ports."""

from __future__ import annotations

import os
from pathlib import Path

from common.ports import free_port
from stack.config import StackConfig

PORT_VARIABLES = ("HEADWATER_KAFKA_PORT", "HEADWATER_KAFKA_CONTROLLER_PORT", "HEADWATER_REGISTRY_PORT",
                  "HEADWATER_GATEWAY_PORT")


def stack_env(state: str | Path) -> dict[str, str]:
    """The stack's variables: its state directory, a free port for each of its listeners, and the gateway's workers
    when the benchmark chose them (HEADWATER_GATEWAY_WORKERS in its environment). StackConfig.from_env reads this
    mapping only: without the last, the stack's own default (two workers) ran where a benchmark measured and
    reported one."""
    env = {"HEADWATER_STATE_DIR": str(state), **{name: str(free_port()) for name in PORT_VARIABLES}}
    workers = os.environ.get("HEADWATER_GATEWAY_WORKERS", "").strip()
    if workers:
        env["HEADWATER_GATEWAY_WORKERS"] = workers
    return env


def stack_config(state: str | Path) -> StackConfig:
    """The stack's configuration (StackConfig.from_env of `stack_env`)."""
    return StackConfig.from_env(stack_env(state))
