"""Private single-node stacks for test sessions: a StackConfig on free ports in a temporary state directory."""

from __future__ import annotations

from pathlib import Path

from stack.config import StackConfig
from tests.support.ports import free_port


def private_stack_config(state_dir: Path, partitions: int = 3, heap_mb: int | None = None) -> StackConfig:
    """Kafka, its controller, the registry and the gateway each on a free port; `partitions` for the events topic."""
    env = {
        "HEADWATER_STATE_DIR": str(state_dir),
        "HEADWATER_KAFKA_PORT": str(free_port()),
        "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()),
        "HEADWATER_REGISTRY_PORT": str(free_port()),
        "HEADWATER_GATEWAY_PORT": str(free_port()),
        "HEADWATER_EVENTS_PARTITIONS": str(partitions),
    }
    if heap_mb is not None:
        env["HEADWATER_KAFKA_HEAP_MB"] = str(heap_mb)
    return StackConfig.from_env(env)
