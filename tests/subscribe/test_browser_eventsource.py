"""A browser's own `EventSource` against the subscription server, unchanged: a page from another origin (allowed by
HEADWATER_SUBSCRIBE_CORS_ORIGINS) reads a stream with the read key in `access_token`, and after the server drops
the connection the browser reconnects by itself with Last-Event-ID, with no gap and no repeat."""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.cdp import Browser
from tests.subscribe.harness import Keys, post_page_views, start_server
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
PAGE = """<!doctype html><meta charset="utf-8"><title>sse</title><script>
window.got = []; window.errors = 0; window.opens = 0;
const es = new EventSource(%s);
es.onopen = () => { window.opens += 1; };
es.onmessage = (e) => window.got.push(JSON.parse(e.data).headers.event_id);
es.onerror = () => { window.errors += 1; };
</script>"""


@pytest.fixture
def page_origin(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static file server on its own port: another origin than the subscription server's."""
    root = tmp_path / "site"
    root.mkdir()
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(root))  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_eventsource_reads_and_resumes_across_origins(page_origin: tuple[str, Path], stack_env: dict[str, str],
                                                      tmp_path: Path) -> None:
    origin, root = page_origin
    keys, port = Keys(), free_port()
    srv = start_server(stack_env, tmp_path, keys, port=port, HEADWATER_SUBSCRIBE_CORS_ORIGINS=origin,
                       HEADWATER_SUBSCRIBE_RETRY_MS="200")
    marker = f"browser-{uuid.uuid4().hex[:8]}"
    url = (f"{srv.url}/v1/streams/event.page_view?access_token={keys.all}"
           f"&filter={json.dumps({'properties.title': marker})}")
    (root / "index.html").write_text(PAGE % json.dumps(url))
    browser = Browser(tmp_path / "chromium")
    try:
        browser.navigate(origin + "/index.html")
        browser.wait_for("window.opens === 1")
        sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 60, marker)
        browser.wait_for("window.got.length >= 60")
        srv.stop()  # the browser sees the stream end, then refused connections
        sent += post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 60, marker)
        srv = start_server(stack_env, tmp_path, keys, port=port, HEADWATER_SUBSCRIBE_CORS_ORIGINS=origin,
                           HEADWATER_SUBSCRIBE_RETRY_MS="200")
        browser.wait_for("window.got.length >= 120", timeout_s=120)
        got = browser.evaluate("window.got")
        assert len(got) == len(set(got)) == 120 and set(got) == set(sent)
        assert browser.evaluate("window.opens") >= 2  # it reconnected by itself
    finally:
        browser.close()
        srv.stop()
