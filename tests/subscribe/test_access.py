"""Access on the real server: read keys scoped to streams, write keys refused, every refusal a documented JSON
error, CORS for browsers, and no key ever written to the log."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.subscribe.harness import Keys, Server, Stream, start_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cors_server(stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Server]:
    srv = start_server(stack_env, tmp_path_factory.mktemp("access"), keys,
                       HEADWATER_SUBSCRIBE_CORS_ORIGINS="https://dash.example")
    try:
        yield srv
    finally:
        srv.stop()


def refused(srv: Server, stream: str, key: str | None, status: int, code: str, **kw: str) -> Stream:
    s = Stream(srv.url, stream, key, kw or None)
    assert s.status == status, (stream, s.status)
    assert s.resp.getheader("Content-Type", "").startswith("application/json")
    body = s.error()
    assert body["code"] == code and isinstance(body["message"], str) and len(body["message"]) <= 300
    s.close()
    return s


def test_keys_and_scopes(cors_server: Server, stack_env: dict[str, str]) -> None:
    k = cors_server.keys
    refused(cors_server, "event.page_view", k.rules, 403, "stream_not_allowed")  # outside its scope
    refused(cors_server, "deadletter", k.rules, 403, "stream_not_allowed")
    refused(cors_server, "rule.no_such_rule", k.rules, 404, "unknown_stream")  # in scope, not there
    refused(cors_server, "event.page_view", stack_env["HEADWATER_WRITE_KEY"], 403, "write_key_not_allowed")
    refused(cors_server, "event.page_view", None, 403, "write_key_not_allowed",
            access_token=stack_env["HEADWATER_WRITE_KEY"])
    refused(cors_server, "event.page_view", k.revoked, 403, "read_key_revoked")
    refused(cors_server, "event.page_view", None, 401, "missing_read_key")
    refused(cors_server, "event.page_view", "hwr_" + "x" * 43, 401, "invalid_read_key")
    refused(cors_server, "events", k.all, 400, "invalid_stream")
    refused(cors_server, "event.page_view", k.all, 400, "invalid_from", **{"from": "yesterday"})
    ok = Stream(cors_server.url, "event.page_view", None, {"access_token": k.all})  # EventSource's way
    assert ok.status == 200
    next(iter(ok.resp.readline, b"\n"))
    ok.close()
    log = Path(cors_server.log).read_text()
    for secret in (k.all, k.rules, k.revoked, stack_env["HEADWATER_WRITE_KEY"]):
        assert secret not in log


def test_cors_and_json_answers_for_other_paths(cors_server: Server) -> None:
    req = urllib.request.Request(cors_server.url + "/v1/streams/event.page_view", method="OPTIONS",
                                 headers={"Origin": "https://dash.example",
                                          "Access-Control-Request-Headers": "authorization"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 204
        assert resp.headers["Access-Control-Allow-Origin"] == "https://dash.example"
        assert "Authorization" in resp.headers["Access-Control-Allow-Headers"]
    s = Stream(cors_server.url, "event.page_view", cors_server.keys.all)
    assert s.resp.getheader("Access-Control-Allow-Origin") is None  # no Origin: no CORS header
    s.close()
    for method, path, status, code in (("GET", "/nope", 404, "not_found"),
                                       ("POST", "/v1/streams/event.page_view", 405, "method_not_allowed")):
        req = urllib.request.Request(cors_server.url + path, method=method, data=b"" if method == "POST" else None,
                                     headers={"Origin": "https://evil.example"})
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == status and json.loads(exc.value.read())["code"] == code
        assert exc.value.headers["Access-Control-Allow-Origin"] is None  # not an allowed origin
