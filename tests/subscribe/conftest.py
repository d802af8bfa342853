"""Fixtures: a subscription server process against the session's test stack (real Kafka, registry, gateway)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.subscribe.harness import Keys, Server, start_server


@pytest.fixture(scope="module")
def keys() -> Keys:
    return Keys()


@pytest.fixture(scope="module")
def server(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Server]:
    """Default settings but a short heartbeat (so idle streams are seen to carry them)."""
    srv = start_server(stack_env, tmp_path_factory.mktemp("subscribe"), keys, HEADWATER_SUBSCRIBE_HEARTBEAT_S="1")
    try:
        yield srv
    finally:
        srv.stop()


def server_log(srv: Server) -> str:
    return Path(srv.log).read_text()
