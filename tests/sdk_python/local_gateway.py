"""A local protocol server for the SDK's process tests: a small aiohttp gateway in a thread (no Kafka behind it)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any


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
