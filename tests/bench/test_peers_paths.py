"""The gateway's Avro side of a peers run (the Avro twins of the JSON bodies, their event ids) and the targets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard

from bench.gateway.workload import Workload
from bench.peers.bodies import SizedWorkload
from bench.peers.rounds import targets
from bench.peers.session import event_ids, topic_of
from gateway.avro_batch import decode_avro_batch
from gateway.config import Limits

pytestmark = pytest.mark.unit
PAGE_VIEW = Path(__file__).resolve().parents[2] / "schemas" / "events" / "page_view" / "v2.avsc"


def test_avro_twins_hold_the_same_events_with_fresh_ids_readable_by_the_gateway() -> None:
    sized = SizedWorkload(Workload(PAGE_VIEW.read_text(), 7), 2000)
    bodies = sized.bodies(2)
    twins = sized.avro(bodies)
    assert [t.content_type for t in twins] == ["application/vnd.headwater.batch+avro"] * 2
    json_ids, avro_ids = event_ids(bodies), event_ids(twins)
    assert len(json_ids) == len(avro_ids) == 80 and not set(json_ids) & set(avro_ids)
    raw = zstandard.ZstdDecompressor().decompress(twins[0].data, max_output_size=1 << 26)
    batch = decode_avro_batch(raw, Limits())
    first = json.loads(zstandard.ZstdDecompressor().decompress(bodies[0].data, max_output_size=1 << 26))["events"][0]
    env = batch.envelopes[0]
    assert env is not None and env.node_id == first["node_id"] and env.seq == first["seq"]
    assert all(len(e) > 1500 for e in batch.events)  # padded like the JSON events (Avro is denser)
    assert topic_of("gateway-avro") == topic_of("gateway") == "gateway" and topic_of("peer") == "peer"


def _row(side: str, rnd: int, **kw: Any) -> dict[str, Any]:
    base = {"side": side, "round": rnd, "events_per_server_cpu_s": 10_000, "p50_ms": 8.0, "p99_ms": 20.0,
            "half_own_p99_ms": 30.0}
    return {**base, **kw}


def _ratios(path: str, **kw: Any) -> dict[str, Any]:
    base = {"round": "median", "path": path, "events_per_server_cpu_s": 3.2, "events_per_system_cpu_s": 2.6,
            "broker_ms_per_1k_events": 1.1}
    return {**base, **kw}


def test_targets_hold_per_path_and_the_latencies_in_every_round() -> None:
    rows = [_row("gateway", 1), _row("gateway", 2, p99_ms=35.0), _row("peer", 1, events_per_server_cpu_s=3000),
            _row("peer", 2, p99_ms=30.0, events_per_server_cpu_s=3000),
            _row("gateway-avro", 1, events_per_server_cpu_s=21_000),
            _row("gateway-avro", 2, events_per_server_cpu_s=19_000)]
    got = targets(rows, [_ratios("json"), _ratios("avro", broker_ms_per_1k_events=1.3)])
    assert got["json_server_cpu_ratio_3"] and got["json_system_cpu_ratio_2_5"]
    assert got["json_broker_per_event_1_2_of_peer"] and not got["avro_broker_per_event_1_2_of_peer"]
    assert not got["json_p99_at_common_rate_le_peer_every_round"]  # round 2: 35 ms against the peer's 30
    assert got["avro_p99_at_common_rate_le_peer_every_round"]
    assert got["json_p50_at_common_rate_le_15ms_every_round"]
    assert got["json_p99_at_half_own_saturation_le_50ms_every_round"]
    assert got["avro_over_json_per_gateway_cpu_2"]  # 2.1 and 1.9: median 2.0
    rows[0]["half_own_p99_ms"] = 51.0
    assert not targets(rows, [_ratios("json")])["json_p99_at_half_own_saturation_le_50ms_every_round"]
