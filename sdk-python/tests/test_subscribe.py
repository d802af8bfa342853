"""Unit tests of `headwater.subscribe`: the event-stream parser, and the iterator's reconnects against a scripted
HTTP server on loopback (a stream that ends, a cut-off, 503 with Retry-After, a refusal that is raised)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import headwater
from headwater._sse import SseParser

pytestmark = pytest.mark.unit


def test_parser_splits_lines_anywhere_and_keeps_the_last_id() -> None:
    stream = (b"retry: 1500\r\nid: p-1\r\n\r\n: hb\n\nid: p-2\ndata: {\"a\":\ndata: 1}\n\n"
              b"event: cutoff\rid: p-3\rdata: {}\r\r")
    for size in (1, 2, 3, 7, len(stream)):
        parser, got = SseParser(), []
        for i in range(0, len(stream), size):
            got += parser.feed(stream[i:i + size])
        assert [(m.event, m.data, m.id) for m in got] == [("message", '{"a":\n1}', "p-2"), ("cutoff", "{}", "p-3")]
        assert parser.retry_ms == 1500 and parser.last_id == "p-3"


def test_parser_bounds_a_line() -> None:
    parser = SseParser(max_line=100)
    with pytest.raises(ValueError):
        parser.feed(b"data: " + b"x" * 200)


def record(i: int) -> bytes:
    doc = {"stream": "rule.r", "partition": 0, "offset": i, "timestamp": 1, "key": None, "value": {"n": i}}
    return f"id: t-{i + 1}\ndata: {json.dumps(doc)}\n\n".encode()


class Script:
    """What each successive connection gets: (status, headers, body)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.seen: list[str | None] = []  # Last-Event-ID of each request


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Script]]:
    script = Script(request.param)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            script.seen.append(self.headers.get("Last-Event-ID"))
            status, headers, body = script.answers.pop(0) if script.answers else (503, {"Retry-After": "1"}, b"{}")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", script
    finally:
        httpd.shutdown()
        httpd.server_close()


SSE = {"Content-Type": "text/event-stream"}


@pytest.mark.parametrize("server", [[
    (200, SSE, b"retry: 10\nid: t-0\n\n" + record(0) + record(1)),          # ends: reconnect
    (503, {"Retry-After": "0", "Content-Type": "application/json"}, b'{"code": "instance_full", "message": "x"}'),
    (200, SSE, record(2) + b'event: cutoff\nid: t-3\ndata: {"code": "subscriber_too_slow"}\n\n'),
    (200, SSE, b"id: t-3\n\n" + record(3) + b'event: gap\ndata: {"code": "retention"}\n\n' + record(4)),
]], indirect=True)
def test_it_reconnects_from_the_last_position(server: tuple[str, Script]) -> None:
    url, script = server
    got = []
    with headwater.subscribe(url, "hwr_k", "rule.r", max_backoff_s=0.05) as sub:
        for rec in sub:
            got.append((rec.offset, rec.id, rec.value["n"]))
            if len(got) == 5:
                break
    assert got == [(i, f"t-{i + 1}", i) for i in range(5)]
    assert script.seen == [None, "t-2", "t-2", "t-3"]
    assert sub.cutoffs == 1 and sub.gaps == [{"code": "retention"}] and sub.last_event_id == "t-5"


@pytest.mark.parametrize("server", [[
    (403, {"Content-Type": "application/json"}, b'{"code": "stream_not_allowed", "message": "no"}')]],
    indirect=True)
def test_a_refusal_is_raised(server: tuple[str, Script]) -> None:
    url, _ = server
    with pytest.raises(headwater.SubscriptionError) as exc:
        next(iter(headwater.subscribe(url, "hwr_k", "event.page_view")))
    assert (exc.value.status, exc.value.code) == (403, "stream_not_allowed")
