"""HAProxy's per-source limits (stack/conf/haproxy.cfg.tmpl) on a real HAProxy: one source's slow connections and
request floods are cut off at its own limits while another source is still answered at once."""

from __future__ import annotations

import http.client
import itertools
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from stack.config import CLUSTER, StackConfig
from stack.haproxy import HAProxy
from tests.support.ports import free_port

pytestmark = pytest.mark.integration
MAX_CONN, MAX_REQUESTS = 20, 30


def _cfg(tmp_path: Path) -> StackConfig:
    cfg = StackConfig.on_free_ports(tmp_path, free_port, replace(CLUSTER, secure=False, spark=False))
    return replace(cfg, haproxy_max_conn_per_source=MAX_CONN, haproxy_max_requests_per_source=MAX_REQUESTS)


def _answered_from(source: str, port: int) -> float:
    """Seconds until HAProxy answers a request from `source` (its backends are down: a 503 is an answer)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        conn.request("GET", "/livez")
        conn.getresponse().read()
    finally:
        conn.close()
    return time.monotonic() - t0


def test_one_source_cannot_take_the_frontend(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    haproxy = HAProxy(cfg)
    haproxy.start()
    slow: list[socket.socket] = []
    try:
        port = cfg.gateway_port
        cut = 0
        for _ in range(MAX_CONN * 3):  # slow clients: half a request line each, never finished
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.1", 0))
                sock.sendall(b"POST /v1/batch HTTP/1.1\r\nHost: x\r\n")
            except (ConnectionResetError, BrokenPipeError):
                cut += 1  # refused as it opened
                continue
            slow.append(sock)
        for sock in slow:
            sock.settimeout(2)
            try:
                cut += sock.recv(1) == b""
            except TimeoutError:
                pass  # still open: within the limit
            except ConnectionResetError:
                cut += 1
        assert cut >= MAX_CONN * 2 - 2, f"only {cut} of {len(slow)} connections over the limit were refused"
        assert _answered_from("127.0.0.3", port) < 2.0  # another source is answered at once
        for sock in slow:
            sock.close()
        slow.clear()
        statuses = []
        for _ in itertools.repeat(None, MAX_REQUESTS + 5):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=("127.0.0.4", 0))
            conn.request("GET", "/livez")
            statuses.append(conn.getresponse().status)
            conn.close()
        assert statuses[-1] == 429 and 429 not in statuses[:MAX_REQUESTS - 1], statuses
        assert _answered_from("127.0.0.5", port) < 2.0
    finally:
        for sock in slow:
            sock.close()
        haproxy.stop()
