"""Test helpers for the SDK's unit tests: decode what a MemoryTransport recorded, scripted answers, a bounded poll."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import zstandard

import headwater
from headwater import Request, Response


def body_of(request: Request) -> dict[str, Any]:
    """The JSON batch a request carried (zstd, gzip or identity)."""
    raw = request.body
    encoding = request.headers.get("Content-Encoding", "identity")
    if encoding == "zstd":
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    elif encoding == "gzip":
        import gzip

        raw = gzip.decompress(raw)
    return json.loads(raw)  # type: ignore[no-any-return]


def batches(transport: headwater.MemoryTransport) -> list[dict[str, Any]]:
    """Every batch body posted through `transport`, in order."""
    return [body_of(r) for r in transport.requests if r.url.endswith("/v1/batch")]


def events(transport: headwater.MemoryTransport) -> list[dict[str, Any]]:
    """Every event posted, in order (retries included)."""
    return [e for b in batches(transport) for e in b["events"]]


def ok(accepted: int = 0, rejected: list[dict[str, Any]] | None = None, status: int = 200) -> Response:
    return Response(status, {"content-type": "application/json"},
                    json.dumps({"batch_id": "x", "accepted": accepted, "rejected": rejected or []}).encode())


def error(status: int, code: str = "err", retry_after: str | None = None) -> Response:
    headers = {"content-type": "application/json"}
    if retry_after is not None:
        headers["retry-after"] = retry_after
    return Response(status, headers, json.dumps({"code": code, "message": code}).encode())


def settles_with_loss(client: headwater.Client, timeout_s: float = 10.0) -> bool:
    """True if `flush()` reports a loss (False) while nothing is left pending: the events settled, some lost."""
    flushed = client.flush(timeout_s)
    m = client.metrics()
    return not flushed and m.queued == 0 and m.pending_events == 0


def wait_until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Poll `predicate` (every 5 ms) until it holds; False if `timeout_s` passed first."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def scripted(answers: list[Response | Exception]) -> Callable[[Request], Response]:
    """A handler answering batches with `answers` in turn, then 200 for ever."""
    it: Iterator[Response | Exception] = iter(answers)

    def handler(request: Request) -> Response:
        answer = next(it, None)
        if answer is None:
            return ok(len(body_of(request)["events"]))
        if isinstance(answer, Exception):
            raise answer
        return answer
    return handler
