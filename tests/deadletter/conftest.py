"""A private stack (Kafka, registry, gateway on free ports) for the dead-letter tests: they register new schema
versions, which must not change the "latest" version other tests' events are encoded with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stack.config import StackConfig
from stack.launcher import Stack
from tests.conftest import free_port


@pytest.fixture(scope="session")
def incident_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The endpoints of the private stack, plus ENV_FILE: the path of its stack.env."""
    state = tmp_path_factory.mktemp("incident-stack")
    cfg = StackConfig.from_env({
        "HEADWATER_STATE_DIR": str(state),
        "HEADWATER_KAFKA_PORT": str(free_port()),
        "HEADWATER_KAFKA_CONTROLLER_PORT": str(free_port()),
        "HEADWATER_REGISTRY_PORT": str(free_port()),
        "HEADWATER_GATEWAY_PORT": str(free_port()),
        "HEADWATER_EVENTS_PARTITIONS": "2",
        "HEADWATER_KAFKA_HEAP_MB": "512",
        "HEADWATER_GATEWAY_WORKERS": "1",  # one is plenty here
    })
    stack = Stack(cfg)
    try:
        yield {**stack.up().env, "ENV_FILE": str(cfg.env_file)}
    finally:
        stack.down()
