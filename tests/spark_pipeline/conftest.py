"""One local SparkSession (local[2], connector jars from set-up) shared by the Spark tests of a session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from spark_pipeline.session import build_session

    session = build_session("headwater-tests")
    try:
        yield session
    finally:
        session.stop()
