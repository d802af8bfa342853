"""The SDKs' `subscribe` against the real server: each keeps reading across a restart of the server (a dropped
connection, then refused connections, then a new process with an empty ring) with no gap and no repeat."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import headwater
import pytest

from tests.subscribe.harness import Keys, Server, post_page_views, start_server
from tests.support.ports import free_port
from tests.support.wait import wait_for

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
NODE_CLIENT = ROOT / "sdk-typescript" / "build" / "test" / "fixtures" / "subscribe.js"
GO = shutil.which("go") or "/usr/local/go/bin/go"
TOTAL = 300


@pytest.fixture(scope="module")
def go_tail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("go-bin") / "headwater-tail"
    subprocess.run([GO, "build", "-o", str(out), "./cmd/headwater-tail"], cwd=ROOT / "sdk-go", check=True, timeout=600,
                   env={**os.environ, "GOTOOLCHAIN": "local"})
    return out


def python_client(url: str, key: str, marker: str, got: list[dict[str, object]]) -> Callable[[], None]:
    sub = headwater.subscribe(url, key, "event.page_view", filter={"properties.title": marker}, max_backoff_s=0.5)

    def run() -> None:
        for rec in sub:
            got.append({"id": rec.id, "event_id": rec.headers["event_id"], "reconnects": sub.reconnects})
            if len(got) >= TOTAL:
                break
        sub.close()
    return run


def process_client(cmd: list[str], got: list[dict[str, object]]) -> Callable[[], None]:
    def run() -> None:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                got.append(json.loads(line))
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    return run


@pytest.fixture(params=["python", "typescript", "go"])
def client(request: pytest.FixtureRequest, go_tail: Path) -> Iterator[str]:
    if request.param == "typescript" and (shutil.which("node") is None or not NODE_CLIENT.exists()):
        pytest.fail(f"{NODE_CLIENT} is missing: run `make setup` (it builds the TypeScript SDK)")
    yield request.param



def test_sdk_resumes_across_a_server_restart(client: str, go_tail: Path, stack_env: dict[str, str],
                                             tmp_path: Path) -> None:
    keys, port, marker = Keys(), free_port(), f"sdk-{client}-{uuid.uuid4().hex[:8]}"
    srv: Server = start_server(stack_env, tmp_path, keys, port=port)
    got: list[dict[str, object]] = []
    filt = json.dumps({"properties.title": marker})
    run = {"python": lambda: python_client(srv.url, keys.all, marker, got),
           "typescript": lambda: process_client(["node", str(NODE_CLIENT), srv.url, keys.all, "event.page_view",
                                                 str(TOTAL), filt], got),
           "go": lambda: process_client([str(go_tail), srv.url, keys.all, "event.page_view", str(TOTAL), filt],
                                        got)}[client]()
    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    try:
        wait_for("one subscriber", lambda: srv.metric("headwater_subscribe_subscribers") == 1, 120, interval_s=0.05)
        sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], TOTAL // 2, marker)
        wait_for("a quarter of the events", lambda: len(got) >= TOTAL // 4, 120, interval_s=0.05)
        srv.stop()  # mid-stream: the client reconnects, is refused, and waits
        sent += post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], TOTAL // 2, marker)
        srv = start_server(stack_env, tmp_path, keys, port=port)  # a new process: its ring starts empty
        reader.join(120)
    finally:
        srv.stop()
    ids = [str(r["event_id"]) for r in got]
    assert len(ids) == len(set(ids)) == TOTAL and set(ids) == set(sent)
    assert int(str(got[-1]["reconnects"])) >= 1
