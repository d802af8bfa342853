"""The fault suite's private stack (own broker, registry and a 2-worker gateway with short Kafka timeouts), shared
by the fault modules of one session so that it starts once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stack.launcher import Stack
from tests.support.stack import private_stack_config

# Short Kafka timeouts so that a dead or hung broker turns into 503s within seconds; the gateway restarted by
# a test gets the same settings through the env it is started with.
FAULT_GATEWAY_ENV = {
    "HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S": "3",
    "HEADWATER_GATEWAY_TRANSACTION_TIMEOUT_S": "6",
    "HEADWATER_GATEWAY_WORKERS": "2",
    "HEADWATER_GATEWAY_REGISTRY_REFRESH_S": "2",
}


@pytest.fixture(scope="package")  # torn down after this folder: it would idle through the session
def fault_stack(tmp_path_factory: pytest.TempPathFactory,
                stack_env: dict[str, str]) -> Iterator[tuple[Stack, dict[str, str]]]:
    # `stack_env` first: the session stack must be up before this fixture changes the environment below.
    cfg = private_stack_config(tmp_path_factory.mktemp("fault-stack"), partitions=2, heap_mb=512)
    stack = Stack(cfg)
    mp = pytest.MonkeyPatch()
    try:
        for name, value in FAULT_GATEWAY_ENV.items():
            mp.setenv(name, value)
        env = stack.up().env
        mp.undo()
        yield stack, {**env, **FAULT_GATEWAY_ENV}
    finally:
        mp.undo()
        stack.down()
