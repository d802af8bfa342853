"""Every registered SDK (sdk-specs/conformance/sdks.json) and the real gateway against the conformance vectors."""

from __future__ import annotations

import functools
import io
import os
import re
from pathlib import Path

import pytest
from hwconformance.gatewaycase import run_gateway_on
from hwconformance.mockgw import ServerTls
from hwconformance.results import FAIL, PASS, Result, summary_line
from hwconformance.runner import load_sdks, run_sdk
from hwconformance.sdkcase import run_vector
from hwconformance.vectors import SPECS, category, load

from tests.certs import TestCA
from tests.conformance.conftest import SUMMARIES

SDK_NAMES = [s.name for s in load_sdks()]
# Over TLS only the vectors whose outcome depends on the transport: connections opened, reused, closed by either
# side, reset, timed out, retried and resumed, configuration of the CA (options and environment), and a body of
# each encoding. The rest (status handling, seqs, splits' ids, spool contents) is transport-blind and runs plain
# (and over TLS too in `make test-long`: HEADWATER_CONFORMANCE_TLS=all).
TLS_VECTORS = {"encoding/batch-of-40", "encoding/avro-fast-path", "encoding/gzip-when-configured",
               "encoding/config-from-environment", "encoding/request-headers",
               "responses/connection-close-reconnect", "responses/server-closes-after-each-answer",
               "responses/concurrent-sends", "responses/retry-connection-reset",
               "responses/retry-closed-without-answer", "responses/retry-answer-timeout",
               "responses/retry-503-retry-after", "responses/413-split-halves", "responses/close-wakes-backoff",
               "durability/restart-resends-unanswered-batch", "responses/failover-refused"}
# Stable codes no outside client can provoke reliably, with the reason (and where they are tested instead).
UNREACHABLE = {"shutting_down": "sent to a request that starts while a worker drains; aiohttp closes idle keep-alive "
                                "connections at shutdown first (tests/gateway/test_commit.py covers ShuttingDown)",
              "payload_too_large": "reserved for an HTTP parser's own 413; aiohttp 3.14 answers over-long lines 400 "
                                   "invalid_http (gateway/400-invalid-http)",
              "headers_too_large": "reserved for an HTTP parser's own 431; aiohttp 3.14 answers over-long headers 400 "
                                   "invalid_http (gateway/400-invalid-http)",
              "internal_error": "a gateway bug: no correct request provokes it "
                                "(tests/gateway/test_http_error_codes.py)",
              "handler_timeout": "the handler's deadline: needs a stalled broker, which a client cannot cause "
                                 "(tests/gateway/test_http_error_codes.py)"}


def _check(target: str, results: list[Result], out: io.StringIO, label: str = "") -> None:
    line = summary_line(target, results) + label
    SUMMARIES.append(line)
    failed = [r for r in results if r.status == FAIL]
    assert not failed, f"{line}\n{out.getvalue()}"
    assert any(r.status == PASS for r in results)


@pytest.mark.integration
@pytest.mark.timeout(1800)  # a build (go, tsc) and ~50 vectors of a few seconds each on a loaded machine
@pytest.mark.parametrize("name", SDK_NAMES)
def test_sdk_passes_its_vectors(name: str) -> None:
    sdk = next(s for s in load_sdks() if s.name == name)
    out = io.StringIO()
    _check(name, run_sdk(sdk, load(), out=out), out)


@pytest.mark.integration
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", SDK_NAMES)
def test_sdk_passes_its_vectors_over_tls(name: str, tmp_path: Path) -> None:
    """The transport's vectors (TLS_VECTORS) with the mock serving HTTPS (a private CA's certificate for localhost,
    given to the SDK as `ca_bundle` / HEADWATER_CA_BUNDLE): keep-alive, retries, splits and close hold over TLS
    (protocol.md §1)."""
    ca = TestCA(tmp_path / "ca")
    leaf = ca.issue("localhost")
    tls = ServerTls(leaf.cert, leaf.key, ca.pem)
    sdk = next(s for s in load_sdks() if s.name == name)
    out = io.StringIO()
    vectors = [v for v in load() if v["id"] in TLS_VECTORS]
    assert {v["id"] for v in vectors} == TLS_VECTORS, "TLS_VECTORS names a vector that does not exist"
    if os.environ.get("HEADWATER_CONFORMANCE_TLS") == "all":  # `make test-long`: every vector over TLS too
        vectors = load()
    _check(name, run_sdk(sdk, vectors, out=out, runner=functools.partial(run_vector, tls=tls)), out, " (over TLS)")


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_gateway_passes_its_vectors(stack_env: dict[str, str]) -> None:
    out = io.StringIO()
    _check("gateway", run_gateway_on([v for v in load() if category(v) == "gateway"], stack_env, out=out), out)


@pytest.mark.unit
def test_vectors_are_valid_and_cover_every_stable_code_of_section_4() -> None:
    vectors = load()
    protocol = (SPECS / "protocol.md").read_text()
    table = protocol[protocol.index("Stable `code`s"):protocol.index("Per-event rejection codes")]
    per_event = protocol[protocol.index("Per-event rejection codes"):].split("\n\n")[0]
    codes = set(re.findall(r"`([a-z_]+)`", table + per_event)) - {"code", "message", "rejected"}
    covered: set[str] = set()
    statuses: set[int] = set()
    for v in vectors:
        if category(v) == "gateway":
            for expect in (v["expect"], v.get("expect_then", {})):
                covered.add(expect.get("code", ""))
                covered.update(r["code"] for r in expect.get("rejected", []))
                statuses.add(expect.get("status", 0))
    missing = codes - covered - set(UNREACHABLE)
    assert not missing, f"stable codes without a gateway vector: {sorted(missing)}"
    assert {200, 400, 401, 403, 408, 413, 415, 422, 429, 503} <= statuses


@pytest.mark.unit
def test_expected_failure_files_name_existing_vectors() -> None:
    ids = {v["id"] for v in load()}
    for path in sorted((SPECS / "conformance" / "xfail").glob("*.json")):
        import json

        unknown = set(json.loads(path.read_text())) - ids
        assert not unknown, f"{path.name} lists unknown vectors {sorted(unknown)}"
    assert Path(SPECS / "conformance" / "DRIVER.md").exists()
