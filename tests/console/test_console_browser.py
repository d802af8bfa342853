"""The console in a real headless Chromium against the test stack: the page loads without console errors, its
charts move while producers send, and a screenshot is taken (saved under .headwater/test-artifacts/)."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack.config import REPO_ROOT
from tests.console.cdp import Browser

pytestmark = pytest.mark.integration
SCREENSHOT = REPO_ROOT / ".headwater" / "test-artifacts" / "console.png"


def send_batches(gateway_url: str, write_key: str, stop: threading.Event) -> None:
    """A producer: batches of 20 page views (2 of them naming a version that does not exist) until stopped."""
    producer, seq = str(uuid.uuid4()), 0
    while not stop.is_set():
        events = []
        for i in range(20):
            event = {"event_id": str(uuid.uuid4()), "event_type": "page_view", "producer_id": producer, "seq": seq,
                     "node_id": "node-0001", "created_at": int(time.time() * 1000),
                     "properties": {"url": "https://example.com/", "path": "/", "title": "t", "user_agent": "ua",
                                    "session_id": "s", "viewport": {"width": 1, "height": 1}, "locale": "en"}}
            if i >= 18:
                event["schema_version"] = 99
            events.append(event)
            seq += 1
        body = json.dumps({"batch_id": str(uuid.uuid4()), "sent_at": int(time.time() * 1000),
                           "sdk": {"name": "console-test", "version": "1"}, "events": events}).encode()
        req = urllib.request.Request(gateway_url + "/v1/batch", data=body, method="POST", headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {write_key}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.status == 200
        stop.wait(0.1)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    b = Browser(tmp_path / "chromium-profile")
    try:
        yield b
    finally:
        b.close()


def canvas_digest(browser: Browser, canvas_id: str) -> str:
    return str(browser.evaluate(f"document.getElementById('{canvas_id}').toDataURL().length + ':' + "
                                f"document.getElementById('{canvas_id}').toDataURL().slice(-400)"))


def test_console_page_draws_live_charts_without_errors(browser: Browser, stack_env: dict[str, str]) -> None:
    url = stack_env["CONSOLE_URL"]
    browser.navigate(url + "/")
    browser.wait_for("window.headwaterConsole && window.headwaterConsole.draws >= 1")
    assert browser.evaluate("document.title") == "Headwater console"

    stop = threading.Event()
    producer = threading.Thread(target=send_batches, args=(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"],
                                                          stop), daemon=True)
    producer.start()
    try:
        browser.wait_for("window.headwaterConsole.snapshot.series.some(p => (p.accepted || 0) > 0)", timeout_s=90)
        before = canvas_digest(browser, "events"), canvas_digest(browser, "latency")
        draws = browser.evaluate("window.headwaterConsole.draws")
        browser.wait_for(f"window.headwaterConsole.draws >= {draws + 3}", timeout_s=60)
        after = canvas_digest(browser, "events"), canvas_digest(browser, "latency")
        browser.wait_for("(window.headwaterConsole.snapshot.deadletters.by_reason['unknown_schema_version'] || 0) > 0",
                         timeout_s=90)
        browser.wait_for("window.headwaterConsole.drawn.deadletters > 0")
    finally:
        stop.set()
        producer.join(60)
    assert before[0] != after[0] and before[1] != after[1], "the charts did not change while producers sent"
    snapshot = browser.evaluate("window.headwaterConsole.snapshot")
    rates = [p["accepted"] for p in snapshot["series"] if p.get("accepted")]
    assert rates and max(rates) > 0
    assert any(p.get("latency_ms", {}).get("p99") for p in snapshot["series"])
    assert snapshot["health"]["registry"] == "ok" and snapshot["health"]["kafka"] == "ok"
    assert browser.evaluate("document.querySelectorAll('#health li.ok').length") >= 3
    path = browser.screenshot(SCREENSHOT)
    assert path.stat().st_size > 10_000
    assert browser.errors == []

    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        exported = resp.read().decode()
    assert 'headwater_deadletter_records{reason="unknown_schema_version"}' in exported
    assert "headwater_loss_audit_still_missing_events 0.0" in exported


def test_axis_labels_differ_on_a_flat_series_and_the_clock_is_utc(browser: Browser, stack_env: dict[str, str]) -> None:
    """A lag of 0 throughout once read `0.00, 0.00, 0.00` up its axis; the header clock was local 12-hour time
    beside UTC panels."""
    browser.navigate(stack_env["CONSOLE_URL"] + "/")
    browser.wait_for("window.headwaterConsole && window.headwaterConsole.draws >= 1")
    labels = browser.evaluate("""(() => {
        const canvas = document.createElement("canvas");
        canvas.width = 560; canvas.height = 220;
        const ctx = canvas.getContext("2d"), drawn = [], original = ctx.fillText.bind(ctx);
        ctx.fillText = (text, x, y) => { if (x === 4) drawn.push(text); return original(text, x, y); };
        canvas.getContext = () => ctx;
        window.HeadwaterCharts.lineChart(canvas, [{ name: "lag", points: [[0, 0], [2000, 0], [4000, 0]] }]);
        return drawn;
    })()""")
    assert len(labels) == 5 and len(set(labels)) == 5, labels
    assert re.fullmatch(r"updated \d\d:\d\d:\d\d UTC · \d+ samples", browser.evaluate(
        "document.getElementById('updated').textContent")), "the header clock is not UTC"
    assert browser.errors == []
