"""Running the gateway vectors: raw requests to real gateway processes, answers checked, Kafka records counted."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, TextIO

from common.envfile import read_env
from common.kafka_read import read_to_end, topic_end_offsets

from .gatewaybody import Generator, build
from .gateways import REVOKED_KEY, WRITE_KEY, GatewayPool
from .patterns import Matcher, Mismatch
from .privatestack import private_stack
from .results import Result, expected_failures, report, settle
from .vectors import category

XFAIL_FILE = "sdk-specs/conformance/xfail/gateway.json"
TARGET = "gateway"


def send(url: str, request: dict[str, Any], body: bytes, headers: dict[str, str],
         timeout_s: float = 60.0) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection; `stall_after_bytes`/`stall_s` pause the body (a slow client)."""
    host, port = url.removeprefix("http://").split(":")
    method = request.get("method", "POST")
    path = request.get("path", "/v1/batch")
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        cut = int(request.get("stall_after_bytes", len(body)))
        sock.sendall(body[:cut])
        if cut < len(body):
            time.sleep(float(request.get("stall_s", 0)))
            with contextlib.suppress(OSError):  # the server may have answered and closed already
                sock.sendall(body[cut:])
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def check_answer(expect: dict[str, Any], status: int, headers: dict[str, str], data: bytes, label: str) -> None:
    """Raise `Mismatch` unless the answer matches the expectation."""
    try:
        body: Any = json.loads(data)
    except ValueError:
        body = None
    shown = data[:300].decode("utf-8", "replace")
    if status != expect["status"]:
        raise Mismatch(f"{label}: status {status}, expected {expect['status']}; body {shown}")
    matcher = Matcher()
    if "code" in expect:
        if not isinstance(body, dict) or body.get("code") != expect["code"]:
            raise Mismatch(f"{label}: expected a JSON body with code {expect['code']!r}, got {shown}")
        if not isinstance(body.get("message"), str):
            raise Mismatch(f"{label}: the error body has no message: {shown}")
    if "accepted" in expect:
        matcher.check(expect["accepted"], body.get("accepted") if isinstance(body, dict) else None, f"{label}.accepted")
    if "rejected" in expect:
        got = body.get("rejected") if isinstance(body, dict) else None
        want = [{"index": r["index"], "code": r["code"], "message": {"$type": "string"}} for r in expect["rejected"]]
        matcher.check(want, got, f"{label}.rejected")
    if "body" in expect:
        matcher.check(expect["body"], body, f"{label}.body")
    if "headers" in expect:
        matcher.check({k.lower(): v for k, v in expect["headers"].items()}, headers, f"{label}.headers")


class KafkaCounter:
    """Counts, per marker, the committed records a run added to the events and dead-letter topics."""

    def __init__(self, bootstrap: str, topics: dict[str, str]) -> None:
        self.bootstrap = bootstrap
        self.topics = topics  # role ("events", "deadletters") -> topic name
        self.start = {role: topic_end_offsets(bootstrap, topic, timeout_s=15) for role, topic in topics.items()}

    def values(self, role: str, timeout_s: float = 60.0) -> list[bytes]:
        """Every committed record value added to the topic since this counter was made."""
        records = read_to_end(self.bootstrap, self.topics[role], start=self.start[role], timeout_s=timeout_s)
        return [bytes(value) for msg in records if (value := msg.value()) is not None]


def run_one(vector: dict[str, Any], pool: GatewayPool, registry_url: str, marker: str) -> None:
    """Send the vector's request(s) and check the answers; raise `Mismatch` if one differs."""
    url = pool.url(vector.get("profile", "default"))
    gen = Generator(marker)
    first = vector["request"]
    body, headers = build(first, gen, registry_url)
    headers = _keys(headers)
    status, got_headers, data = send(url, first, body, headers)
    check_answer(vector["expect"], status, got_headers, data, "answer")
    if "then" in vector:
        then = vector["then"]
        if not then.get("same_as_request"):
            body, headers = build(then, gen, registry_url)
            headers = _keys(headers)
        status, got_headers, data = send(url, then, body, headers)
        check_answer(vector["expect_then"], status, got_headers, data, "second answer")


def _keys(headers: dict[str, str]) -> dict[str, str]:
    basic = base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
    return {k: v.replace("{write_key}", WRITE_KEY).replace("{revoked_key}", REVOKED_KEY).replace("{basic}", basic)
            for k, v in headers.items()}


def run_gateway(vectors: list[dict[str, Any]], stack_env_path: str | None, out: TextIO = sys.stdout) -> list[Result]:
    """Every gateway vector, on a running stack (its stack.env) or on a private one started for the run."""
    chosen = [v for v in vectors if category(v) == "gateway"]
    if not chosen:
        return []
    if stack_env_path:
        return run_gateway_on(chosen, read_env(Path(stack_env_path)), out)
    with private_stack() as env:
        return run_gateway_on(chosen, env, out)


def run_gateway_on(vectors: list[dict[str, Any]], env: dict[str, str], out: TextIO = sys.stdout) -> list[Result]:
    """Every gateway vector against gateways started on the stack described by `env`."""
    xfails = expected_failures(XFAIL_FILE)
    counter = KafkaCounter(env["KAFKA_BOOTSTRAP"], {"events": env.get("EVENTS_TOPIC", "headwater.events"),
                                                    "deadletters": env.get("DEADLETTER_TOPIC", "headwater.deadletter")})
    pending: list[tuple[dict[str, Any], str, str, float]] = []
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="hw-conformance-gw-") as tmp:
        pool = GatewayPool(env, Path(tmp))
        try:
            pool.start([v.get("profile", "default") for v in vectors])
            for vector in vectors:
                marker = "conf" + uuid.uuid4().hex[:16]
                start = time.monotonic()
                try:
                    run_one(vector, pool, env["REGISTRY_URL"], marker)
                    detail = ""
                except (Mismatch, OSError, http.client.HTTPException, RuntimeError) as exc:
                    detail = f"{type(exc).__name__}: {exc}" if not isinstance(exc, Mismatch) else str(exc)
                pending.append((vector, marker, detail, time.monotonic() - start))
        finally:
            pool.stop()
        written = {role: counter.values(role) for role in ("events", "deadletters")}
    for vector, marker, detail, seconds in pending:
        problems = [detail] if detail else []
        for role, key in (("events", "events_written"), ("deadletters", "deadletters_written")):
            if key in vector["expect"]:
                n = sum(1 for v in written[role] if marker.encode() in v)
                if n != vector["expect"][key]:
                    problems.append(f"{key}: {n} record(s) with this run's marker in the {role} topic, "
                                    f"expected {vector['expect'][key]}")
        result = settle(TARGET, vector["id"], not problems, "\n".join(problems), xfails=xfails, seconds=seconds)
        report(result, out)
        results.append(result)
    return results
