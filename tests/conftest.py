"""Session fixtures: one private stack (Kafka, registry, gateway) and one local SparkSession per test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from common.envfile import read_env
from stack.launcher import Stack
from tests.support import times
from tests.support.stack import private_stack_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def pytest_configure(config: pytest.Config) -> None:
    """Seconds per test folder at the end of every run (tests/support/times.py). The pipelines the tests start do
    not answer `rules apply`'s analysis requests (spark_pipeline/rules/checks.py) unless a test turns that on: a
    test's pipeline stopping just before another test applies a rule would make that wait for a reply."""
    times.register(config)
    os.environ.setdefault("HEADWATER_RULES_CHECKS", "0")


@pytest.fixture(scope="session")
def stack_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The endpoints of a running stack.

    With HEADWATER_TEST_STACK_ENV=<path to a stack.env> the tests use that running stack (for example the one
    `make up` started); otherwise a private stack is started on free ports in a temporary state directory and
    stopped at the end of the session.
    """
    existing = os.environ.get("HEADWATER_TEST_STACK_ENV")
    if existing:
        yield read_env(Path(existing))
        return
    stack = Stack(private_stack_config(tmp_path_factory.mktemp("stack")))
    try:
        yield stack.up().env
    finally:
        stack.down()


@pytest.fixture(scope="session")
def bootstrap(stack_env: dict[str, str]) -> str:
    return stack_env["KAFKA_BOOTSTRAP"]


@pytest.fixture(scope="session")
def registry_url(stack_env: dict[str, str]) -> str:
    """The schema registry of the test stack (added by the registry service)."""
    return stack_env["REGISTRY_URL"]


@pytest.fixture(scope="session")
def gateway_url(stack_env: dict[str, str]) -> str:
    """The gateway of the test stack (added by the gateway service)."""
    return stack_env["GATEWAY_URL"]


@pytest.fixture(scope="session")
def write_key(stack_env: dict[str, str]) -> str:
    """The development write key the stack created for the gateway."""
    return stack_env["HEADWATER_WRITE_KEY"]


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local SparkSession (the pipeline's default master, connector jars from set-up) for every Spark test of
    the session: starting one takes tens of seconds on two cores. Tests only read and write through it, each with
    its own topics."""
    from spark_pipeline.session import build_session

    session = build_session("headwater-tests")
    try:
        yield session
    finally:
        session.stop()
