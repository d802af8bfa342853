"""Property tests of batch packing: never more than N events or the byte cap, nothing lost, order kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater._batcher import Batcher

pytestmark = pytest.mark.unit


@given(sizes=st.lists(st.integers(min_value=0, max_value=5_000), max_size=300),
       max_items=st.integers(min_value=1, max_value=40), max_bytes=st.integers(min_value=300, max_value=20_000))
def test_batches_respect_both_caps_and_keep_every_item_in_order(sizes: list[int], max_items: int,
                                                                max_bytes: int) -> None:
    batcher: Batcher[int] = Batcher(max_items, max_bytes, overhead=256)
    out: list[list[int]] = []
    accepted: list[int] = []
    for i, size in enumerate(sizes):
        if not batcher.fits_alone(size):
            continue
        accepted.append(i)
        out.extend(batcher.add(i, size))
    tail = batcher.drain()
    if tail:
        out.append(tail)
    assert [i for batch in out for i in batch] == accepted
    for batch in out:
        assert 1 <= len(batch) <= max_items
        assert 256 + sum(sizes[i] + 1 for i in batch) <= max_bytes
    assert len(batcher) == 0


def test_a_full_batch_is_sealed_at_once() -> None:
    batcher: Batcher[int] = Batcher(3, 10_000)
    assert batcher.add(1, 10) == [] and batcher.add(2, 10) == []
    assert batcher.add(3, 10) == [[1, 2, 3]]
