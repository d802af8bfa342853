"""The scriptable mock gateway: records every request, answers from a vector's script (statuses, delays,
connection resets, `Connection: close`, closing a connection after N requests), serves registry look-ups and
`/readyz`, and can be taken down (connections refused) or made unavailable (503) and brought back."""

from __future__ import annotations

import contextlib
import email.utils
import itertools
import json
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .wire import decode_body

BATCH_PATH = "/v1/batch"
READY_PATH = "/readyz"
MAX_BODY = 64 << 20
STATES = ("up", "down", "unavailable")
UNAVAILABLE = {"status": 503, "code": "kafka_unavailable", "headers": {"Retry-After": "1"}}


class Recorded(dict[str, Any]):
    """One request as seen by the mock: method, path, headers (lower-case names), body, decoded batch,
    connection number `conn` (`conn_base` + 1, 2, ... in order of acceptance), arrival time `t` (monotonic
    seconds), the mock's `gateway` name and the `status` it answered (None: reset or dropped)."""


@dataclass(frozen=True)
class ServerTls:
    """The mock's certificate (for `localhost`), its key, and the CA file an SDK is given as `ca_bundle`."""

    cert: Path
    key: Path
    ca: Path

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.cert), str(self.key))
        return context


class MockGateway:
    """A threaded HTTP/1.1 server on a free loopback port; `script` is consumed one answer per batch request."""

    def __init__(self, script: list[dict[str, Any]] | None = None, *, close_after: int | None = None,
                 registry: dict[str, dict[str, Any]] | None = None, tls: ssl.SSLContext | None = None,
                 name: str = "primary", state: str = "up", conn_base: int = 0) -> None:
        self.name = name
        self.state = state
        self.probes = 0  # GET /readyz requests
        self.script = list(script or [])
        self.close_after = close_after
        self.registry = registry or {}
        self.requests: list[Recorded] = []
        self.registry_calls: list[str] = []
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self._conns = itertools.count(conn_base + 1)
        self._open: set[socket.socket] = set()  # accepted connections, cut when the mock goes down
        self.tls = tls
        self._server = self._bind(0)
        self._port = int(self._server.server_address[1])
        self._thread: threading.Thread | None = None

    def _bind(self, port: int) -> _QuietServer:
        server = _QuietServer(("127.0.0.1", port), _handler(self))
        server.tls = self.tls
        server.daemon_threads = True
        return server

    @property
    def url(self) -> str:
        """The base URL (`http://127.0.0.1:<port>`; `https://localhost:<port>` when serving TLS)."""
        if self.tls is not None:
            return f"https://localhost:{self._port}"
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> MockGateway:
        """Start serving in a background thread (in state `down`: listen on nothing until set `up`)."""
        if self.state == "down":
            self._server.server_close()
        else:
            self._serve()
        return self

    def _serve(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"mock-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()
        self._cut()

    def set_state(self, state: str) -> None:
        """`up` (serve the script, then 200), `unavailable` (503 to every batch and to /readyz) or `down` (the
        port refuses connections and every open connection is cut); coming back up listens on the same port."""
        if state not in STATES:
            raise ValueError(f"unknown gateway state {state!r}")
        was, self.state = self.state, state
        if state == "down" and was != "down":
            self.stop()
        elif state != "down" and was == "down":
            self._server = self._bind(self._port)
            self._serve()

    def track(self, sock: socket.socket, open_: bool) -> None:
        """Remember (or forget) an accepted connection, so that going down cuts it."""
        with self.lock:
            if open_:
                self._open.add(sock)
            else:
                self._open.discard(sock)

    def _cut(self) -> None:
        with self.lock:
            conns, self._open = list(self._open), set()
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def next_conn(self) -> int:
        """The number of a newly accepted connection."""
        return next(self._conns)

    def record(self, req: Recorded) -> dict[str, Any] | None:
        """Keep a batch request; return the scripted answer for it (None: the default 200)."""
        with self.lock:
            req["index"] = len(self.requests)
            req["gateway"] = self.name
            self.requests.append(req)
            self.arrived.notify_all()
            if self.state == "unavailable":
                return UNAVAILABLE
            return self.script.pop(0) if self.script else None

    def wait_requests(self, count: int, timeout_s: float) -> bool:
        """Wait until at least `count` batch requests arrived; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self.lock:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.arrived.wait(left)
            return True

    def quiet_for(self, seconds: float, timeout_s: float) -> None:
        """Wait until no request arrived for `seconds` (or `timeout_s` passed)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                last = self.requests[-1]["t"] if self.requests else 0.0
            if time.monotonic() - last >= seconds:
                return
            time.sleep(0.05)


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up mid-answer (a timeout under test) is expected: no traceback on stderr. With `tls`,
    each accepted connection is wrapped and its handshake done in the connection's own thread."""

    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, addr = super().get_request()
        if self.tls is None:
            return conn, addr
        return self.tls.wrap_socket(conn, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


def default_answer(decoded: Any) -> tuple[int, dict[str, Any]]:
    """200 accepting every event of the batch."""
    events = decoded.get("events", []) if isinstance(decoded, dict) else []
    batch_id = decoded.get("batch_id") if isinstance(decoded, dict) else None
    return 200, {"batch_id": batch_id, "accepted": len(events), "rejected": []}


class _Handler(BaseHTTPRequestHandler):
    """One connection of the mock; `mock` is set by `_handler` on a subclass."""

    mock: MockGateway
    protocol_version = "HTTP/1.1"
    conn = 0
    served = 0

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(30)
            self.request.do_handshake()  # a refused handshake ends this connection only (handle_error is quiet)
            self.request.settimeout(None)
        super().setup()
        self.conn = self.mock.next_conn()
        self.mock.track(self.connection, True)

    def finish(self) -> None:
        self.mock.track(self.connection, False)
        with contextlib.suppress(OSError):  # the connection was cut (the mock went down)
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        if self.path == READY_PATH:  # the gateway's readiness probe: ready unless the mock is unavailable
            self.mock.probes += 1
            ready = self.mock.state == "up"
            self._send(200 if ready else 503, {"status": "ready" if ready else "not_ready"}, {})
            return
        self.mock.registry_calls.append(self.path)
        prefix, suffix = "/subjects/headwater.events.", "/versions/latest"
        name = self.path[len(prefix):-len(suffix)] if self.path.startswith(prefix) and \
            self.path.endswith(suffix) else None
        entry = self.mock.registry.get(name or "")
        if entry is None:
            self._send(404, {"error_code": 40401, "message": "Subject not found"}, {})
            return
        doc = {"subject": f"headwater.events.{name}", "id": entry["id"], "version": entry.get("version", 1),
               "schema": json.dumps(entry["schema"])}
        self._send(200, doc, {"Content-Type": "application/vnd.schemaregistry.v1+json"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, MAX_BODY))
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = Recorded(method="POST", path=self.path, headers=headers, body=body, conn=self.conn,
                       t=time.monotonic())
        try:
            req["decoded"] = decode_body(body, headers)
        except Exception as exc:  # recorded and answered 400: the vector's checks report it
            req["decoded"] = None
            req["decode_error"] = f"{type(exc).__name__}: {exc}"
        answer = self.mock.record(req) if self.path == BATCH_PATH else {"status": 404}
        self._answer(req, answer or {})

    def _answer(self, req: Recorded, answer: dict[str, Any]) -> None:
        time.sleep(float(answer.get("delay_s", 0)))
        action = answer.get("action")
        req["status"] = None
        if action in ("reset", "drop"):
            if action == "reset":  # RST instead of FIN: the client sees "connection reset by peer"
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        status = int(answer.get("status", 200))
        if "body" in answer:
            body: Any = answer["body"]
        elif status in (200, 422) or req.get("decode_error"):
            status, body = (400, {"code": "invalid_body", "message": req["decode_error"]}) \
                if req.get("decode_error") else (status, _per_event(req["decoded"], answer))
        else:
            body = {"code": answer.get("code", f"http_{status}"), "message": "scripted answer"}
        headers = {k: _header_value(v) for k, v in answer.get("headers", {}).items()}
        req["status"] = status
        self.served += 1
        if action == "close" or (self.mock.close_after is not None and self.served >= self.mock.close_after):
            if action == "close":
                headers["Connection"] = "close"
            self.close_connection = True
        self._send(status, body, headers)

    def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        if not any(k.lower() == "content-type" for k in headers):
            self.send_header("Content-Type", "application/json")
        for key, value in headers.items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()


def _handler(mock: MockGateway) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to `mock`."""
    return type("Handler", (_Handler,), {"mock": mock})


def _header_value(value: str) -> str:
    """A scripted header value; `$http_date_in:<seconds>` becomes the HTTP-date that many seconds from now."""
    if value.startswith("$http_date_in:"):
        return email.utils.formatdate(time.time() + float(value.split(":", 1)[1]), usegmt=True)
    return value


def _per_event(decoded: Any, answer: dict[str, Any]) -> dict[str, Any]:
    body = default_answer(decoded)[1]
    rejected = [dict(r, message=r.get("message", "scripted rejection")) for r in answer.get("rejected", [])]
    if answer.get("reject_all"):
        rejected = [{"index": i, "code": answer["reject_all"], "message": "scripted rejection"}
                    for i in range(body["accepted"])]
    body["rejected"] = rejected
    body["accepted"] = max(0, body["accepted"] - len(rejected))
    return body
