"""The private stack a benchmark starts: the local stack's settings, in a state directory of its own, on free ports."""

from __future__ import annotations

from pathlib import Path

from common.ports import free_port
from stack.config import StackConfig

PORT_VARIABLES = ("HEADWATER_KAFKA_PORT", "HEADWATER_KAFKA_CONTROLLER_PORT", "HEADWATER_REGISTRY_PORT",
                  "HEADWATER_GATEWAY_PORT")


def stack_env(state: str | Path) -> dict[str, str]:
    """The stack's variables: its state directory and a free port for each of its listeners."""
    return {"HEADWATER_STATE_DIR": str(state), **{name: str(free_port()) for name in PORT_VARIABLES}}


def stack_config(state: str | Path) -> StackConfig:
    """The stack's configuration (StackConfig.from_env of `stack_env`)."""
    return StackConfig.from_env(stack_env(state))
