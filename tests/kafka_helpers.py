"""Kept for the SDK and pipeline tests that still import it: the helpers live in tests/support/kafka.py."""

from tests.support.kafka import consume_all, end_offsets, values

__all__ = ["consume_all", "end_offsets", "values"]
