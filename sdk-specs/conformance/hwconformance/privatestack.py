"""A private stack (Kafka, registry; the launcher's gateway is not used) on free ports, for `make conformance`."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from common.ports import free_port
from stack.config import StackConfig
from stack.launcher import Stack


@contextlib.contextmanager
def private_stack() -> Iterator[dict[str, str]]:
    """Start the dev stack in a temporary state directory on free ports; yield its endpoints; stop it."""
    with tempfile.TemporaryDirectory(prefix="hw-conformance-stack-") as state:
        cfg = StackConfig.from_env({
            "HEADWATER_STATE_DIR": str(Path(state)), "HEADWATER_KAFKA_PORT": str(free_port()),
            "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()), "HEADWATER_REGISTRY_PORT": str(free_port()),
            "HEADWATER_GATEWAY_PORT": str(free_port()), "HEADWATER_EVENTS_PARTITIONS": "2",
        })
        stack = Stack(cfg)
        try:
            yield dict(stack.up().env)
        finally:
            stack.down()
