"""The registry's HTTP surface as raw requests: content type, error bodies, and the endpoints clients probe."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

pytestmark = pytest.mark.integration
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, str, Any]:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, resp.headers["Content-Type"], json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], json.loads(exc.read())


def test_root_is_an_empty_object_with_the_registry_content_type(registry_url: str) -> None:
    status, ctype, body = call(registry_url + "/")
    assert (status, body) == (200, {})
    assert ctype.startswith(CONTENT_TYPE)


def test_unknown_paths_and_associations_are_404_with_an_error_body(registry_url: str) -> None:
    status, _, body = call(registry_url + "/associations/resources/-/headwater.events?resourceType=topic")
    assert status == 404 and body["error_code"] == 404


@pytest.mark.parametrize(("request_", "expected"), [
    (("/subjects/{s}/versions", "POST", b"{nope"), (400, 400)),
    (("/subjects/{s}/versions", "POST", b'{"schema": 42}'), (422, 42201)),
    (("/subjects/{s}/versions", "POST", b'{"schema": "\\"int\\"", "schemaType": "PROTOBUF"}'), (422, 42201)),
    (("/subjects/{s}/versions/0", "GET", None), (422, 42202)),
    (("/subjects/{s}/versions/latest", "GET", None), (404, 40401)),
    (("/config/{s}", "GET", None), (404, 40408)),
    (("/config/{s}", "PUT", b'{"compatibility": "sideways"}'), (422, 42203)),
    (("/schemas/ids/notanumber", "GET", None), (404, 40403)),
    (("/subjects/{s}", "POST", b'{"schema": "\\"int\\""}'), (404, 40401)),
])
def test_errors(registry_url: str, request_: tuple[str, str, bytes | None], expected: tuple[int, int]) -> None:
    path, method, body = request_
    got_status, ctype, got = call(registry_url + path.format(s=f"test.{uuid.uuid4().hex}"), method, body)
    assert (got_status, got["error_code"]) == expected, got
    assert isinstance(got["message"], str) and ctype.startswith(CONTENT_TYPE)


def test_verbose_compatibility_names_field_and_rule(registry_url: str) -> None:
    subject = f"test.{uuid.uuid4().hex}"
    v1 = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "string"}]}
    assert call(f"{registry_url}/subjects/{subject}/versions", "POST",
                json.dumps({"schema": json.dumps(v1)}).encode())[0] == 200
    v2 = {"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]}
    status, _, body = call(f"{registry_url}/compatibility/subjects/{subject}/versions/latest?verbose=true", "POST",
                           json.dumps({"schema": json.dumps(v2)}).encode())
    assert status == 200 and body["is_compatible"] is False
    assert "type_mismatch" in body["messages"][0] and "field a" in body["messages"][0]
