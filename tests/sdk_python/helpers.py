"""Test helpers for the SDK: decode what a MemoryTransport recorded, scripted answers, a local protocol server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import headwater
import zstandard
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


class LocalGateway:
    """A small aiohttp server in a thread that answers POST /v1/batch per protocol.md (JSON batches).

    Records every (producer_id, seq) it acknowledged; `fail_with` makes it answer that status (with
    Retry-After: 0) instead; `delay_s` slows every answer.
    """

    def __init__(self, delay_s: float = 0.0, ssl_context: Any = None) -> None:
        self.delay_s = delay_s
        self.ssl_context = ssl_context
        self.fail_with: int | None = None
        self.seen: list[tuple[str, int]] = []
        self.events: list[dict[str, Any]] = []
        self.peers: set[Any] = set()
        self.batch_ids: list[str] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.url = ""

    def __enter__(self) -> LocalGateway:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.close()

    async def _serve(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=4 << 20)
        app.router.add_post("/v1/batch", self._handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        port = runner.addresses[0][1]
        self.url = f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{port}"
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        self.peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail_with is not None:
            return web.json_response({"code": "unavailable", "message": "down"}, status=self.fail_with,
                                     headers={"Retry-After": "0"})
        body = json.loads(await request.read())  # aiohttp already undid Content-Encoding
        with self._lock:
            self.batch_ids.append(body["batch_id"])
            self.seen.extend((e["producer_id"], e["seq"]) for e in body["events"])
            self.events.extend(body["events"])
        return web.json_response({"batch_id": body["batch_id"], "accepted": len(body["events"]), "rejected": []})
