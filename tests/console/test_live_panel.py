"""The console's live panel in a real headless Chromium, fed by the subscription server through the console's relay:
records appear as they are committed, a stream that does not exist yet is shown as unavailable (and retried), and
the page logs no error."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stack.config import REPO_ROOT
from tests.console.cdp import Browser
from tests.subscribe.harness import post_page_views

pytestmark = pytest.mark.integration
SCREENSHOT = REPO_ROOT / ".headwater" / "test-artifacts" / "console-live.png"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    b = Browser(tmp_path / "chromium-profile")
    try:
        yield b
    finally:
        b.close()


def test_live_panel_shows_records_as_they_are_committed(browser: Browser, stack_env: dict[str, str]) -> None:
    browser.navigate(stack_env["CONSOLE_URL"] + "/?live=event.page_view")
    browser.wait_for("window.headwaterLive && window.headwaterLive.status === 'live'")
    marker = f"live-{uuid.uuid4().hex[:8]}"
    sent = post_page_views(stack_env["GATEWAY_URL"], stack_env["HEADWATER_WRITE_KEY"], 30, marker)
    want = json.dumps(marker)
    browser.wait_for(f"window.headwaterLive.records.filter(r => r.value.properties.title === {want}).length >= 25")
    shown = browser.evaluate("[...document.querySelectorAll('#live tbody tr')].map(tr => tr.textContent)")
    assert len(shown) == 25 and all(any(i in row for i in sent) for row in shown)  # the newest 25
    ids = browser.evaluate(f"window.headwaterLive.records.filter(r => r.value.properties.title === {want})"
                           ".map(r => r.headers.event_id)")
    assert set(ids) <= set(sent) and len(set(ids)) == len(ids)
    assert browser.screenshot(SCREENSHOT).stat().st_size > 10_000
    assert browser.errors == []


def test_a_stream_that_does_not_exist_yet_is_shown_and_retried(browser: Browser, stack_env: dict[str, str]) -> None:
    browser.navigate(stack_env["CONSOLE_URL"] + "/?live=rule.not_applied_yet")
    status = browser.wait_for("window.headwaterLive && window.headwaterLive.status.startsWith('unavailable') "
                              "&& window.headwaterLive.status")
    assert "unknown_stream" in status
    assert browser.evaluate("document.getElementById('live-status').textContent").startswith("rule.not_applied_yet")
    assert browser.errors == []
