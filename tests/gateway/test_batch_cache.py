"""The committed-batch answers shared by the workers of one instance (two handles on one file stand in for two
worker processes; the cross-process case runs over HTTP in test_lost_responses.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway import batch_cache
from gateway.batch_cache import SharedCommittedBatches

pytestmark = pytest.mark.unit


def test_an_answer_put_by_one_worker_is_found_by_another(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite3"
    first, second = SharedCommittedBatches(path, 100), SharedCommittedBatches(path, 100)

    async def main() -> None:
        first.put("dev", "b1", 200, {"accepted": 3}, b"digest-1")
        assert first.get("dev", "b1") == (200, {"accepted": 3}, b"digest-1")  # at once in the worker that committed it
        await first.written()
        assert second.get("dev", "b1") == (200, {"accepted": 3}, b"digest-1")  # in the others once written() returned

    asyncio.run(main())
    assert second.get("other-source", "b1") is None and second.get("dev", "b2") is None


def test_the_shared_answers_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_cache, "PRUNE_EVERY", 10)
    cache = SharedCommittedBatches(tmp_path / "answers.sqlite3", 50)
    for i in range(500):
        cache.put("dev", f"b{i}", 200, {"i": i}, bytes([i % 256]))
    cache.flush()
    assert 50 <= len(cache) <= 60
    other = SharedCommittedBatches(tmp_path / "answers.sqlite3", 50)
    assert other.get("dev", "b499") == (200, {"i": 499}, bytes([499 % 256])) and other.get("dev", "b0") is None
    cache.close()


def test_size_zero_keeps_nothing(tmp_path: Path) -> None:
    cache = SharedCommittedBatches(tmp_path / "answers.sqlite3", 0)
    cache.put("dev", "b", 200, {}, b"")
    cache.flush()
    assert cache.get("dev", "b") is None and len(cache) == 0


def test_a_worker_starting_while_another_holds_the_new_file_waits_for_it(tmp_path: Path) -> None:
    """Workers start together: one switching the new file to WAL must not make another fail with 'database is
    locked' (seen in CI: a worker exited at start and missed the reload it was sent)."""
    import sqlite3
    import threading

    path = tmp_path / "committed-batches.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        cache = SharedCommittedBatches(path, 10, busy_timeout_s=0.01)  # far shorter than the lock is held

        async def main() -> None:
            cache.put("s", "b1", 200, {"accepted": 1}, b"d")
            await cache.written()

        asyncio.run(main())
        assert SharedCommittedBatches(path, 10).get("s", "b1") == (200, {"accepted": 1}, b"d")
    finally:
        release.join()
        holder.close()
