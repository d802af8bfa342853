"""The hostile requests of issue 14 sent to a real `python -m gateway` process (the test stack's broker and
registry): its log holds no write key, no traceback and no error line, and its answers are JSON.
"""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path

import pytest

from tests.gateway.helpers import WRITE_KEY, batch, dumps, page_view
from tests.gateway.hostile import MALFORMED, http_request, raw_http
from tests.support.gateway import gateway_env, start_gateway, url_of, wait_live

pytestmark = pytest.mark.integration


def test_real_gateway_process_logs_no_key_and_no_traceback(bootstrap: str, registry_url: str,
                                                           tmp_path: Path) -> None:
    env = gateway_env(bootstrap, registry_url, HEADWATER_GATEWAY_WORKERS="1", HEADWATER_GATEWAY_LOG_LEVEL="DEBUG",
                      HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX=f"hostile-{uuid.uuid4().hex[:8]}")
    port = int(env["HEADWATER_GATEWAY_PORT"])
    log_path = tmp_path / "gateway.log"
    url = url_of(env)
    with log_path.open("wb") as out:
        proc = start_gateway(env, out)
        try:
            wait_live(url, proc)

            async def attack() -> None:
                for data in MALFORMED:
                    status, hdrs, _ = await raw_http(url, data)
                    assert status == 400 and hdrs["content-type"].startswith("application/json")
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(http_request(b"x" * 10_000)[:-9_000])
                await writer.drain()
                await asyncio.sleep(0.3)
                writer.close()
                event = page_view()
                event["properties"]["viewport"] = "DEEP"
                deep = dumps(batch(event)).replace(b'"DEEP"', b"[" * 600 + b"1" + b"]" * 600)
                status, _, body = await raw_http(url, http_request(deep, "Connection: close\r\n"))
                assert status == 422, body
                status, _, body = await raw_http(url, http_request(dumps(batch(page_view())), "Connection: close\r\n"))
                assert status == 200, body

            asyncio.run(attack())
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    text = log_path.read_text()
    assert WRITE_KEY not in text and "Traceback" not in text
    docs = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert not [d for d in docs if d["level"] == "error"], [d for d in docs if d["level"] == "error"]
    assert [d["code"] for d in docs if d.get("code") == "client_disconnected"] == ["client_disconnected"]
    assert sum(1 for d in docs if d.get("status") == 400 and d.get("error")) == len(MALFORMED)
