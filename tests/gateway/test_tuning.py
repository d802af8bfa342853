"""The tuning knobs: the event loop (uvloop, or asyncio's own when absent or switched off) and the producer's
compression and linger, read from the environment and passed to librdkafka."""

from __future__ import annotations

import asyncio
import sys

import pytest

from gateway.config import ConfigError, GatewayConfig
from gateway.loop import loop_factory, loop_name, run
from gateway.producer import kafka_config

pytestmark = pytest.mark.unit
BASE = {"KAFKA_BOOTSTRAP": "127.0.0.1:9092", "REGISTRY_URL": "http://127.0.0.1:8081",
        "HEADWATER_GATEWAY_WRITE_KEYS": "dev:" + "a" * 64}


def test_uvloop_runs_the_worker_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert loop_name(True) == "uvloop"

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run(which(), True).startswith("uvloop")


def test_switched_off_or_absent_uvloop_falls_back_to_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    assert loop_factory(False) is None
    assert not GatewayConfig.from_env({**BASE, "HEADWATER_GATEWAY_UVLOOP": "0"}).uvloop
    assert GatewayConfig.from_env(BASE).uvloop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError, as on a machine without it

    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert loop_factory(True) is None and loop_name(True) == "asyncio"
    assert run(which(), True).startswith("asyncio")


def test_compression_and_linger_reach_librdkafka() -> None:
    cfg = GatewayConfig.from_env({**BASE, "HEADWATER_GATEWAY_KAFKA_COMPRESSION": "LZ4",
                                  "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "5"})
    assert (cfg.kafka_compression, cfg.kafka_linger_ms) == ("lz4", 5.0)
    config = kafka_config("b:1", "t", 5.0, 10.0, compression=cfg.kafka_compression, linger_ms=cfg.kafka_linger_ms)
    assert config["compression.type"] == "lz4" and config["linger.ms"] == 5.0
    assert GatewayConfig.from_env(BASE).kafka_compression == "none"
    assert GatewayConfig.from_env(BASE).commit_min_interval_ms == 10.0


def test_a_linger_as_long_as_the_delivery_timeout_is_refused() -> None:
    """librdkafka refuses to create a producer whose message.timeout.ms is not above its linger.ms."""
    with pytest.raises(ConfigError, match="HEADWATER_GATEWAY_KAFKA_LINGER_MS"):
        GatewayConfig.from_env({**BASE, "HEADWATER_GATEWAY_KAFKA_LINGER_MS": "1000",
                                "HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S": "1"})
    assert GatewayConfig.from_env(BASE).kafka_linger_ms == 100.0


@pytest.mark.parametrize(("variable", "value"), [("HEADWATER_GATEWAY_KAFKA_COMPRESSION", "brotli"),
                                                 ("HEADWATER_GATEWAY_KAFKA_LINGER_MS", "-1"),
                                                 ("HEADWATER_GATEWAY_UVLOOP", "maybe")])
def test_bad_tuning_values_name_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        GatewayConfig.from_env({**BASE, variable: value})
