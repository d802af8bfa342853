"""A real `python -m gateway` (two workers, the test stack's broker and registry) serving HTTPS and the proxy's
unix socket: batches committed to Kafka over both, X-Forwarded-For believed on the socket only, SIGHUP reloading
every worker's certificate, and the socket removed at shutdown."""

from __future__ import annotations

import signal
import ssl
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.certs import TestCA
from tests.gateway.helpers import WRITE_KEY, batch, dumps, json_headers, page_view, zstd
from tests.support.gateway import gateway_env, start_gateway
from tests.support.kafka import consume_all, end_offsets
from tests.support.ports import free_port
from tests.support.processes import running, wait_serving
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration


def _post(opener: urllib.request.OpenerDirector, url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url + "/v1/batch", data=body, headers=headers, method="POST")
    with opener.open(request, timeout=30) as resp:
        return int(resp.status)


def _post_unix(path: str, body: bytes, headers: dict[str, str]) -> int:
    import http.client
    import socket

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)

    conn = UnixConnection("gateway", timeout=30)
    try:
        conn.request("POST", "/v1/batch", body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_tls_and_proxy_socket_in_a_real_gateway(bootstrap: str, registry_url: str, tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "ca")
    server = ca.issue("gateway")
    port = free_port()
    sock_path = str(tmp_path / "gateway.sock")
    env = gateway_env(bootstrap, registry_url, port, WRITE_KEY, HEADWATER_GATEWAY_WORKERS="2",
                      HEADWATER_GATEWAY_TLS_CERT=str(server.cert), HEADWATER_GATEWAY_TLS_KEY=str(server.key),
                      HEADWATER_GATEWAY_PROXY_SOCKET=sock_path,
                      HEADWATER_GATEWAY_TRANSACTIONAL_ID_PREFIX=f"tls-{uuid.uuid4().hex[:8]}")
    url = f"https://localhost:{port}"
    context = ssl.create_default_context(cafile=str(ca.pem))
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
    marker = uuid.uuid4().hex
    start = end_offsets(bootstrap, "headwater.events")
    log_path = tmp_path / "gateway.log"
    with log_path.open("wb") as out:
        proc = start_gateway(env, out)
        try:
            wait_serving(url + "/readyz", proc, 120, context=context, interval_s=0.2)
            hdrs = json_headers(WRITE_KEY)
            assert _post(opener, url, zstd(dumps(batch(page_view(0, marker)))),
                         {**hdrs, "X-Forwarded-For": "6.6.6.6"}) == 200
            assert _post_unix(sock_path, zstd(dumps(batch(page_view(1, marker)))),
                              {**hdrs, "X-Forwarded-For": "6.6.6.6, 10.1.2.3"}) == 200
            records = [r for r in consume_all(bootstrap, "headwater.events", expected_at_least=2, start=start)
                       if marker.encode() in (r.value() or b"")]
            ips = sorted(str(dict(r.headers() or [])["client_ip"]) for r in records)
            assert ips == [str(b"10.1.2.3"), str(b"127.0.0.1")]

            # /readyz answered by one worker says nothing of the other: reload once both listen.
            wait_for("both workers listening", lambda: log_path.read_text().count('"msg": "listening"') == 2, 120,
                     interval_s=0.2, alive=running(proc))
            proc.send_signal(signal.SIGHUP)
            wait_for("both workers to reload",
                     lambda: log_path.read_text().count("reloaded the TLS certificate") == 2, 120, interval_s=0.2,
                     alive=running(proc))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    assert proc.returncode == 0
    assert not Path(sock_path).exists()
    log = log_path.read_text()
    assert WRITE_KEY not in log and "Traceback" not in log
