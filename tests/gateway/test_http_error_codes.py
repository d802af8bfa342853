"""The JSON answers for errors aiohttp's server raises itself: each status carries its documented §4 code."""

from __future__ import annotations

import json

import pytest

from gateway.http_errors import parser_error_response

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("status", "code"), [(400, "invalid_http"), (413, "payload_too_large"),
                                              (431, "headers_too_large"), (500, "internal_error"),
                                              (504, "handler_timeout"), (418, "invalid_http")])
def test_each_server_error_status_has_its_documented_code(status: int, code: str) -> None:
    resp = parser_error_response(status, ValueError("secret header value hw_live_key"))
    assert resp.status == status and resp.content_type == "application/json"
    assert resp.body is not None
    body = json.loads(bytes(resp.body))  # type: ignore[arg-type]
    assert body["code"] == code
    assert "hw_live_key" not in body["message"]  # the exception's text (request bytes) is never echoed
