"""A private stack (Kafka, registry, gateway on free ports) for the dead-letter tests: they register new schema
versions, which must not change the "latest" version other tests' events are encoded with."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from stack.launcher import Stack
from tests.support.stack import private_stack_config


@pytest.fixture(scope="package")  # torn down after this folder: it would idle through the session
def incident_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The endpoints of the private stack, plus ENV_FILE: the path of its stack.env."""
    cfg = replace(private_stack_config(tmp_path_factory.mktemp("incident-stack"), partitions=2, heap_mb=512),
                  gateway_workers=1)  # one is plenty here
    stack = Stack(cfg)
    try:
        yield {**stack.up().env, "ENV_FILE": str(cfg.env_file)}
    finally:
        stack.down()
