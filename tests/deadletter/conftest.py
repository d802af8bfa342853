"""A private stack (Kafka, registry, gateway on free ports) for the dead-letter tests: they register new schema
versions, which must not change the "latest" version other tests' events are encoded with."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from stack.launcher import Stack
from tests.support.stack import private_stack_config


@pytest.fixture(scope="session")
def incident_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The endpoints of the private stack, plus ENV_FILE: the path of its stack.env."""
    cfg = private_stack_config(tmp_path_factory.mktemp("incident-stack"), partitions=2, heap_mb=512)
    stack = Stack(cfg)
    workers = os.environ.get("HEADWATER_GATEWAY_WORKERS")
    os.environ["HEADWATER_GATEWAY_WORKERS"] = "1"  # read by the gateway service at start; one is plenty here
    try:
        env = stack.up().env
    finally:
        if workers is None:
            os.environ.pop("HEADWATER_GATEWAY_WORKERS", None)
        else:
            os.environ["HEADWATER_GATEWAY_WORKERS"] = workers
    try:
        yield {**env, "ENV_FILE": str(cfg.env_file)}
    finally:
        stack.down()
