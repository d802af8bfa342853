"""Unit tests of configuration parsing, write keys and client addresses."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

from gateway.auth import credentials, new_write_key, parse_keys
from gateway.config import ConfigError, GatewayConfig
from gateway.connections import ConnectionRecycler
from gateway.errors import Forbidden, Unauthorized
from tests.support.keys import gateway_keys, key_entry

pytestmark = pytest.mark.unit
KEY = new_write_key()
BASE = {"KAFKA_BOOTSTRAP": "127.0.0.1:9092", "REGISTRY_URL": "http://127.0.0.1:8081/",
        **gateway_keys(KEY)}


def test_defaults_and_overrides() -> None:
    cfg = GatewayConfig.from_env({**BASE, "HEADWATER_GATEWAY_MAX_EVENTS": "10"})
    assert cfg.limits.max_events == 10 and cfg.limits.max_body_bytes == 1 << 20
    assert cfg.registry_url == "http://127.0.0.1:8081"
    assert cfg.trusted_proxies == frozenset() and cfg.tls is None and cfg.proxy_socket == ""
    assert cfg.keys.authenticate(f"Bearer {KEY}") == "dev"


@pytest.mark.parametrize(("env", "variable"), [
    ({"KAFKA_BOOTSTRAP": ""}, "KAFKA_BOOTSTRAP"),
    ({"HEADWATER_GATEWAY_MAX_EVENTS": "many"}, "HEADWATER_GATEWAY_MAX_EVENTS"),
    ({"HEADWATER_GATEWAY_MAX_EVENTS": "0"}, "HEADWATER_GATEWAY_MAX_EVENTS"),
    ({"HEADWATER_GATEWAY_WRITE_KEYS": "dev:abc"}, "HEADWATER_GATEWAY_WRITE_KEYS"),
    ({"HEADWATER_GATEWAY_WRITE_KEYS": ""}, "HEADWATER_GATEWAY_WRITE_KEYS"),
    ({"HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S": "30"}, "HEADWATER_GATEWAY_DELIVERY_TIMEOUT_S"),
    ({"HEADWATER_GATEWAY_LOG_LEVEL": "LOUD"}, "HEADWATER_GATEWAY_LOG_LEVEL"),
    ({"HEADWATER_GATEWAY_WRITE_KEYS_FILE": "/nonexistent/keys"}, "HEADWATER_GATEWAY_WRITE_KEYS_FILE"),
    ({"HEADWATER_GATEWAY_TRUSTED_PROXIES": "127.0.0.2"}, "HEADWATER_GATEWAY_TRUSTED_PROXIES"),
    ({"HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES": "haproxy"}, "HEADWATER_GATEWAY_TRUSTED_PROXY_NAMES needs"),
    ({"HEADWATER_GATEWAY_TLS_CERT": "/x.pem"}, "HEADWATER_GATEWAY_TLS_CERT and HEADWATER_GATEWAY_TLS_KEY"),
    ({"HEADWATER_GATEWAY_TLS_CLIENT_CA": "/ca.pem"}, "HEADWATER_GATEWAY_TLS_CLIENT_CA needs"),
    ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "KAFKA_SECURITY_PROTOCOL=SASL_SSL needs KAFKA_SASL_USERNAME"),
    ({"HEADWATER_GATEWAY_REGISTRY_BASIC_AUTH_USER_INFO": "x"}, "HEADWATER_GATEWAY_REGISTRY_BASIC_AUTH_USER_INFO"),
])
def test_errors_name_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        GatewayConfig.from_env({**BASE, **env})


def test_keys_file(tmp_path: Path) -> None:
    other = new_write_key()
    path = tmp_path / "keys"
    path.write_text(f"# comment\n{key_entry(other, 'web')}\n{key_entry('x' * 40, 'old', revoked=True)}\n")
    cfg = GatewayConfig.from_env({**BASE, "HEADWATER_GATEWAY_WRITE_KEYS_FILE": str(path)})
    assert cfg.keys.sources() == {"dev", "web", "old"}
    assert cfg.keys.authenticate(f"Bearer {other}") == "web"
    with pytest.raises(Forbidden):
        cfg.keys.authenticate("Bearer " + "x" * 40)


def test_credentials_forms() -> None:
    assert credentials(f"Bearer {KEY}") == KEY
    assert credentials(f"bearer   {KEY} ") == KEY
    assert credentials("Basic " + base64.b64encode(f"{KEY}:".encode()).decode()) == KEY
    for bad in (None, "", "Bearer", "Token abc", "Basic !!!", "Basic " + base64.b64encode(b":pw").decode()):
        with pytest.raises(Unauthorized):
            credentials(bad)
    store = parse_keys(key_entry(KEY))
    with pytest.raises(Unauthorized):
        store.authenticate("Bearer hw_other")


class _Transport:
    """Stands for an asyncio transport (weak-referenceable)."""


def test_recycler_jitter_bounds() -> None:
    recycler = ConnectionRecycler(max_age_s=100, max_requests=10, jitter=0.5, rng=random.Random(3))
    transport = _Transport()
    closes = [recycler.should_close(transport, now=0.0) for _ in range(10)]
    assert closes[-1] and 5 <= closes.index(True) + 1 <= 10
    young = _Transport()
    assert not recycler.should_close(young, now=0.0)
    assert recycler.should_close(young, now=100.0)


def test_source_rates_refill() -> None:
    from gateway.errors import RateLimited
    from gateway.limits import SourceRates

    rates = SourceRates(rate=10, burst_s=1)
    rates.admit("a", 10, now=0.0)
    with pytest.raises(RateLimited) as info:
        rates.admit("a", 5, now=0.1)
    assert info.value.retry_after == 1
    rates.admit("b", 10, now=0.1)  # buckets are per source
    rates.admit("a", 5, now=0.6)
    SourceRates(rate=0).admit("a", 10**9)  # 0 = unlimited


def test_batch_larger_than_the_bucket_is_admitted_when_full_and_leaves_a_debt() -> None:
    from gateway.errors import RateLimited
    from gateway.limits import SourceRates

    rates = SourceRates(rate=5, burst_s=2)  # holds 10 events; a legal batch may hold 40
    rates.admit("a", 40, now=0.0)  # refused forever before (429 on every retry): a livelock
    with pytest.raises(RateLimited) as info:
        rates.admit("a", 40, now=1.0)  # the debt (-30) must be paid back first: 40 events take 8 s
    assert info.value.retry_after == 7
    rates.admit("a", 40, now=8.0)
    with pytest.raises(RateLimited):
        rates.admit("a", 1, now=8.1)


def test_log_budget_admits_a_burst_then_a_rate_and_counts_the_dropped() -> None:
    from gateway.http_errors import LogBudget

    budget = LogBudget(rate=2, burst=3)
    budget.last = 0.0
    assert [budget.admit(now=0.0) for _ in range(5)] == [0, 0, 0, None, None]
    assert budget.admit(now=0.5) == 2  # one token back; the line says two were dropped
    assert budget.admit(now=0.6) is None
