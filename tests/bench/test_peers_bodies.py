"""Bodies padded to an event size: same batch, same ids, every event at least the size asked, still valid JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zstandard

from bench.gateway.workload import Workload
from bench.peers.bodies import SizedWorkload, event_size, mean_event_bytes, pad

pytestmark = pytest.mark.unit
PAGE_VIEW = Path(__file__).resolve().parents[2] / "schemas" / "events" / "page_view" / "v2.avsc"


def _events(data: bytes) -> list[dict[str, object]]:
    return list(json.loads(zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 26))["events"])


def test_padding_lengthens_the_title_of_every_event_to_the_size_asked() -> None:
    body = Workload(PAGE_VIEW.read_text(), 1).json_body()
    padded = pad(body, 3000)
    before, after = _events(body.data), _events(padded.data)
    assert [e["event_id"] for e in before] == [e["event_id"] for e in after]
    assert all(event_size(e) == 3000 for e in after)
    assert padded.events == body.events and padded.content_type == body.content_type
    assert 2990 <= mean_event_bytes([padded]) <= 3010
    assert _events(pad(body, 10).data) == before  # already longer: unchanged
    title = str(after[0]["properties"]["title"])  # type: ignore[index]
    assert len(set(title[-200:])) > 10  # random hex, not a run of one character that compresses to nothing


def test_the_sized_workload_pads_only_when_asked() -> None:
    workload = Workload(PAGE_VIEW.read_text(), 1)
    assert 900 < mean_event_bytes(SizedWorkload(workload, 0).bodies(2)) < 2000
    assert mean_event_bytes(SizedWorkload(workload, 2500).bodies(2)) == 2500
