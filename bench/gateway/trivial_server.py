"""The cost model's HTTP floor: an aiohttp server on the gateway's event loop whose handler reads the body and answers.

    python -m bench.gateway.trivial_server PORT

It does what every request costs the gateway before any of its own work (parse the request, read the body over
keep-alive, write a small JSON answer) and nothing else, so its CPU per batch is the part no gateway code can save.
"""

from __future__ import annotations

import asyncio
import os
import sys

from aiohttp import web

from gateway.loop import loop_factory

UVLOOP = "HEADWATER_GATEWAY_UVLOOP"  # as the gateway's own setting: 0 = asyncio's loop


async def _batch(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response({"batch_id": "", "accepted": len(body) and 40, "rejected": []})


def main(argv: list[str]) -> None:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/batch", _batch)
    web.run_app(app, host="127.0.0.1", port=int(argv[0]), print=None, access_log=None,
                loop=(loop_factory(os.environ.get(UVLOOP, "1") != "0") or asyncio.new_event_loop)())


if __name__ == "__main__":
    main(sys.argv[1:])
