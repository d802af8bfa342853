"""The peer's Benthos configuration, the read-back's id extraction and check, the ratios, and the build cache."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import fastavro
import pytest

from bench.peers import build
from bench.peers.__main__ import gateway_compression
from bench.peers.config import PATH, PeerSettings, render, render_text
from bench.peers.readback import avro_event_id, check, json_event_id
from bench.peers.rounds import capacity, median, net_of_idle, ratios
from common.avro_frame import frame
from gateway.config import GatewayConfig

pytestmark = pytest.mark.unit
PAGE_VIEW = Path(__file__).resolve().parents[2] / "schemas" / "events" / "page_view" / "v2.avsc"


def _settings(**kw: object) -> PeerSettings:
    base: dict[str, object] = {"port": 18080, "brokers": "127.0.0.1:9092,127.0.0.1:9093", "topic": "t",
                               "schema_path": "/tmp/s.json"}
    return PeerSettings(**{**base, **kw})  # type: ignore[arg-type]


def test_the_peer_answers_after_the_acks_of_an_idempotent_producer_and_validates_every_event() -> None:
    doc = render(_settings())
    server = doc["input"]["http_server"]
    assert server["address"] == "127.0.0.1:18080" and server["path"] == PATH == "/v1/batch"
    assert server["allowed_verbs"] == ["POST"] and server["sync_response"] == {"status": "200"}
    steps = doc["pipeline"]["processors"]
    assert steps[0]["switch"][0]["check"] == 'meta("Content-Encoding") == "zstd"'
    assert steps[0]["switch"][0]["processors"] == [{"decompress": {"algorithm": "zstd"}}]
    assert "this.events.map_each" in steps[1]["mapping"] and "timestamp_unix_milli()" in steps[1]["mapping"]
    assert steps[2] == {"unarchive": {"format": "json_array"}}
    assert steps[3] == {"json_schema": {"schema_path": "file:///tmp/s.json"}}
    kafka = doc["output"]["reject_errored"]["kafka_franz"]
    assert kafka["seed_brokers"] == ["127.0.0.1:9092", "127.0.0.1:9093"] and kafka["topic"] == "t"
    assert kafka["idempotent_write"] is True and kafka["compression"] == "zstd"
    assert kafka["key"] == '${! json("node_id") }' and kafka["max_in_flight"] == 64
    assert json.loads(render_text(_settings())) == doc


@pytest.mark.parametrize("bad", [{"port": 0}, {"schema_path": "s.json"}, {"compression": "brotli"},
                                 {"max_in_flight": 0}])
def test_settings_out_of_range_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        _settings(**bad)


def test_the_event_id_is_read_from_the_framed_avro_record_or_its_header() -> None:
    schema = fastavro.parse_schema(json.loads(PAGE_VIEW.read_text()))
    rec = {"event_id": "0b0e4f4e-8d43-4f3a-9b1e-5b8f5e0c2a11", "event_type": "page_view",
           "producer_id": "0b0e4f4e-8d43-4f3a-9b1e-5b8f5e0c2a12", "seq": 3, "node_id": "n", "created_at": 1,
           "sent_at": 2, "sdk_name": "s", "sdk_version": "1",
           "properties": {"url": "u", "path": "/", "title": "t", "user_agent": "a", "session_id": "s",
                          "viewport": {"width": 1, "height": 2}, "locale": "en", "load_time_ms": 1.0,
                          "utm": {}, "experiment_ids": []}}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, rec)
    assert avro_event_id(frame(7, buf.getvalue()), None) == rec["event_id"]
    assert avro_event_id(b"{}", [("producer_id", b"p"), ("event_id", b"e-1")]) == "e-1"
    assert avro_event_id(b"{}", []) is None
    assert json_event_id(b'{"context":{},"event_id":"e-2","x":1}', None) == "e-2"
    assert json_event_id(b'{"id":"e-2"}', None) is None


def test_the_durability_check_finds_losses_duplicates_and_strangers() -> None:
    sent = {"a", "b", "c"}
    assert check(Counter({"a": 1, "b": 1, "c": 1}), sent, 3).ok
    lost = check(Counter({"a": 1, "b": 1}), sent, 3)
    assert not lost.ok and lost.missing == 1 and lost.exact
    dup = check(Counter({"a": 2, "b": 1, "c": 1}), sent, 3)
    assert not dup.ok and dup.duplicates == 1
    assert not check(Counter({"a": 1, "b": 1, "c": 1, "z": 1}), sent, 3).ok
    # Some bodies failed: which ones is unknown, so at least the acknowledged count must be found.
    assert check(Counter({"a": 1, "b": 1}), sent, 2).ok
    assert not check(Counter({"a": 1}), sent, 2).ok


def test_ratios_are_gateway_over_peer_and_the_median_skips_unknowns() -> None:
    r = ratios({"events_per_s": 300, "events_per_server_cpu_s": 30, "p99_ms": 5},
               {"events_per_s": 100, "events_per_server_cpu_s": 0, "p99_ms": 10})
    assert r["events_per_s"] == 3.0 and r["events_per_server_cpu_s"] is None and r["p99_ms"] == 0.5
    assert median([3.0, None, 1.0, 2.0]) == 2.0 and median([1.0, 2.0]) == 1.5 and median([None]) is None


def test_cores_per_10k_events_come_from_the_median_cpu_cost_of_each_side() -> None:
    rows = [{"side": "gateway", "events_per_server_cpu_s": 20_000, "broker_ms_per_1k_events": 30.0},
            {"side": "gateway", "events_per_server_cpu_s": 10_000, "broker_ms_per_1k_events": 50.0},
            {"side": "peer", "events_per_server_cpu_s": 8_000, "broker_ms_per_1k_events": 10.0}]
    assert capacity(rows) == {"gateway_server_cores": 0.67, "gateway_broker_cores": 0.4,
                              "peer_server_cores": 1.25, "peer_broker_cores": 0.1}


def test_the_brokers_idle_cpu_is_taken_out_of_its_cost_per_event() -> None:
    row = {"broker_cpu_s": 3.0, "wall_s": 10.0, "events": 40_000}
    net_of_idle(row, 0.1)
    assert row["broker_net_ms_per_1k_events"] == 50.0  # (3.0 - 0.1 x 10) s / 40 k events
    quiet = {"broker_cpu_s": 0.5, "wall_s": 10.0, "events": 1000}
    net_of_idle(quiet, 0.1)
    assert quiet["broker_net_ms_per_1k_events"] == 0.0  # never negative


def test_the_binary_is_cached_by_the_hash_of_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module = tmp_path / "m"
    module.mkdir()
    for name in build.SOURCES:
        (module / name).write_text(name)
    monkeypatch.setenv("HEADWATER_PEERS_CACHE", str(tmp_path / "cache"))
    first = build.source_hash(module)
    cached = tmp_path / "cache" / f"headwater-benthos-{first}"
    cached.parent.mkdir()
    cached.write_text("binary")
    assert build.build(module, log=False) == cached  # no Go run: the cache has it
    (module / "go.sum").write_text("changed")
    assert build.source_hash(module) != first


def test_the_linkname_check_is_turned_off_only_where_the_linker_has_it() -> None:
    assert build.ldflags("go version go1.26.8 linux/amd64") == ["-ldflags=-checklinkname=0"]
    assert build.ldflags("go version go1.23.0 linux/amd64") == ["-ldflags=-checklinkname=0"]
    assert build.ldflags("go version go1.22.2 linux/amd64") == []


def test_the_peer_uses_the_gateways_producer_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_GATEWAY_KAFKA_COMPRESSION", "LZ4")
    assert gateway_compression() == "lz4"
    monkeypatch.delenv("HEADWATER_GATEWAY_KAFKA_COMPRESSION")
    assert gateway_compression() == getattr(GatewayConfig, "kafka_compression", "zstd")
