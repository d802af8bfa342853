"""The running gateway checked against sdk-specs/openapi.yaml: schemathesis-generated requests, then real
answers of every kind validated against the documented responses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.gateway.helpers import batch, page_view

pytestmark = pytest.mark.integration
SPEC = Path(__file__).resolve().parents[2] / "sdk-specs" / "openapi.yaml"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]


@pytest.fixture(scope="module")
def schema() -> Any:
    return schemathesis.openapi.from_path(SPEC)


def test_generated_requests_conform(schema: Any, gateway_url: str, write_key: str) -> None:
    for path, method in [("/v1/batch", "POST"), ("/livez", "GET"), ("/readyz", "GET"), ("/metrics", "GET")]:
        operation = schema[path][method]

        @settings(max_examples=40 if method == "POST" else 3, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            case.call_and_validate(base_url=gateway_url, headers={"Authorization": f"Bearer {write_key}"},
                                   checks=CHECKS)

        check()


@pytest.mark.parametrize(("name", "body", "headers", "status"), [
    ("valid", batch(page_view()), {}, 200),
    ("all rejected", batch(page_view(event_type="ghost")), {}, 422),
    ("undecodable", {"batch_id": "x"}, {}, 400),
    ("too many", batch(*[page_view(i) for i in range(41)]), {}, 413),
    ("bad key", batch(page_view()), {"Authorization": "Bearer hw_nope"}, 401),
    ("encoding", batch(page_view()), {"Content-Encoding": "br"}, 415),
])
def test_real_answers_match_the_spec(schema: Any, gateway_url: str, write_key: str, *, name: str, body: Any,
                                     headers: dict[str, str], status: int) -> None:
    operation = schema["/v1/batch"]["POST"]
    case = operation.Case(body=body, media_type="application/json",
                          headers={"Content-Encoding": "identity", **headers})
    response = case.call(base_url=gateway_url,
                         headers={"Authorization": f"Bearer {write_key}", **headers})
    assert response.status_code == status, (name, response.text)
    case.validate_response(response, checks=CHECKS)
