"""The secured broker every test of this folder shares (started once per session, stopped at its end)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.broker import SecureKafka, start, stop


@pytest.fixture(scope="package")  # torn down after this folder: it would idle through the session
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    kafka = start(tmp_path_factory.mktemp("secure-kafka"))
    try:
        yield kafka
    finally:
        stop(kafka)
