"""Client configuration: defaults, environment variables, and errors that name the bad option."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import headwater
from headwater import ClientConfig, ConfigError

pytestmark = pytest.mark.unit


def test_defaults_follow_the_protocol() -> None:
    cfg = ClientConfig(endpoint="http://gw:8080", write_key="k")
    assert cfg.max_batch_events == 40
    assert cfg.compression == "zstd"
    assert cfg.wire_format == "json"
    assert cfg.retry_base_s == 0.5 and cfg.retry_max_s == 30.0
    assert cfg.queue_policy == "drop_newest"
    assert cfg.spool_dir is None


def test_from_env_reads_every_variable_and_aliases() -> None:
    env = {"GATEWAY_URL": "http://gw:1", "HEADWATER_WRITE_KEY": "k", "REGISTRY_URL": "http://reg:2",
           "HEADWATER_SPOOL_DIR": "/tmp/s", "HEADWATER_LINGER_S": "0.2", "HEADWATER_MAX_BATCH_EVENTS": "10",
           "HEADWATER_QUEUE_POLICY": "drop_oldest", "HEADWATER_WIRE_FORMAT": "avro", "HEADWATER_NODE_ID": "n1"}
    cfg = ClientConfig.from_env(env)
    assert (cfg.endpoint, cfg.registry_url, cfg.spool_dir) == ("http://gw:1", "http://reg:2", "/tmp/s")
    assert cfg.linger_s == 0.2 and cfg.max_batch_events == 10 and cfg.queue_policy == "drop_oldest"
    assert cfg.wire_format == "avro" and cfg.node_id == "n1"


def test_headwater_names_win_over_aliases_and_overrides_win_over_env() -> None:
    env = {"HEADWATER_ENDPOINT": "http://a:1", "GATEWAY_URL": "http://b:1", "HEADWATER_WRITE_KEY": "k"}
    assert ClientConfig.from_env(env).endpoint == "http://a:1"
    assert ClientConfig.from_env(env, endpoint="http://c:1").endpoint == "http://c:1"


@pytest.mark.parametrize(("env", "names"), [
    ({}, "HEADWATER_ENDPOINT or GATEWAY_URL"),
    ({"HEADWATER_ENDPOINT": "http://a"}, "HEADWATER_WRITE_KEY"),
    ({"HEADWATER_ENDPOINT": "http://a", "HEADWATER_WRITE_KEY": "k", "HEADWATER_LINGER_S": "soon"},
     "HEADWATER_LINGER_S"),
    ({"HEADWATER_ENDPOINT": "http://a", "HEADWATER_WRITE_KEY": "k", "HEADWATER_MAX_BATCH_EVENTS": "41"},
     "HEADWATER_MAX_BATCH_EVENTS"),
    ({"HEADWATER_ENDPOINT": "http://a", "HEADWATER_WRITE_KEY": "k", "HEADWATER_QUEUE_POLICY": "yolo"},
     "HEADWATER_QUEUE_POLICY"),
    ({"HEADWATER_ENDPOINT": "ftp://a", "HEADWATER_WRITE_KEY": "k"}, "endpoint"),
    ({"HEADWATER_ENDPOINT": "http://a", "HEADWATER_WRITE_KEY": "k", "HEADWATER_WIRE_FORMAT": "avro"},
     "HEADWATER_REGISTRY_URL"),
])
def test_bad_values_name_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        ClientConfig.from_env(env)


@pytest.mark.parametrize("options", [
    {"endpoint": "http://ops:s3cret@gw:8080"},
    {"endpoints": ["http://gw-a:8080", "https://ops:s3cret@gw-b:8443"]},
    {"endpoint": "http://gw:8080", "registry_url": "http://ops:s3cret@reg:8081"},
    {"endpoint": "http://token@gw:8080"},
])
def test_a_url_carrying_credentials_is_refused_without_repeating_them(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="must not carry credentials") as caught:
        ClientConfig(write_key="k", **{"endpoint": None, **options})  # type: ignore[arg-type]
    assert "s3cret" not in str(caught.value) and "token" not in str(caught.value) and "***@" in str(caught.value)


def test_a_proxy_may_carry_its_login_and_bad_proxy_urls_hide_it() -> None:
    assert ClientConfig(endpoint="http://gw", write_key="k", proxy="http://me:pw@proxy:3128").proxy
    with pytest.raises(ConfigError) as caught:
        ClientConfig(endpoint="http://gw", write_key="k", proxy="ftp://me:pw@proxy:3128")
    assert "pw@" not in str(caught.value)


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        headwater.Client("http://a", "k", lingr_s=1)


def test_spill_needs_a_spool() -> None:
    with pytest.raises(ConfigError, match="spool_dir"):
        ClientConfig(endpoint="http://a", write_key="k", queue_policy="spill")


def test_every_option_is_documented_in_the_readme() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[2] / "sdk-python" / "README.md").read_text()
    for f in dataclasses.fields(ClientConfig):
        assert f"`{f.name}`" in readme, f.name


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:abc", "http://127.0.0.1:99999", "http://:80", "ftp://gw",
                                      "gw:8080", "http://gw/ path", "http://gw:0", "http://gw/?q=1", "", None])
def test_bad_endpoints_fail_at_construction(endpoint: object) -> None:
    with pytest.raises(ConfigError, match="endpoint"):
        headwater.Client(endpoint, "k", disabled=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("endpoint", ["http://gw", "https://gw:8443", "http://127.0.0.1:8080/", "http://[::1]:80/x"])
def test_good_endpoints(endpoint: str) -> None:
    assert ClientConfig(endpoint=endpoint, write_key="k").endpoint == endpoint


def test_new_options_from_the_environment() -> None:
    env = {"HEADWATER_ENDPOINT": "http://gw", "HEADWATER_WRITE_KEY": "k", "HEADWATER_MAX_IN_FLIGHT": "8",
           "HEADWATER_DISABLED": "true", "HEADWATER_DEBUG": "0", "HEADWATER_PROXY": "http://proxy:3128",
           "HEADWATER_RETRY_REFUSED_MAX_S": "1.5"}
    cfg = ClientConfig.from_env(env)
    assert cfg.max_in_flight == 8 and cfg.disabled is True and cfg.debug is False
    assert cfg.proxy == "http://proxy:3128" and cfg.retry_refused_max_s == 1.5
    assert ClientConfig(endpoint="http://gw", write_key="k").max_in_flight == 16
    with pytest.raises(ConfigError, match="HEADWATER_DISABLED"):
        ClientConfig.from_env({**env, "HEADWATER_DISABLED": "maybe"})
    with pytest.raises(ConfigError, match="HEADWATER_MAX_IN_FLIGHT"):
        ClientConfig.from_env({**env, "HEADWATER_MAX_IN_FLIGHT": "0"})


def test_sync_durability_needs_a_spool_and_a_bad_spool_dir_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="durability 'sync' needs spool_dir"):
        ClientConfig(endpoint="http://a", write_key="k", durability="sync")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(ConfigError, match="spool_dir"):
        headwater.Client("http://a", "k", spool_dir=str(not_a_dir / "spool"))


def test_avro_without_the_extra_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "fastavro", None)  # as if `headwater[avro]` was not installed
    monkeypatch.setitem(sys.modules, "headwater._avro", None)
    with pytest.raises(ConfigError, match=r"headwater\[avro\]"):
        headwater.Client("http://gw", "k", wire_format="avro", registry_url="http://reg",
                         transport=headwater.MemoryTransport())


@pytest.mark.parametrize(("url", "shown"), [
    ("http://gw:1/a@b", "http://gw:1/a@b"), ("http://u:p@gw:1/x?y=@z", "http://***@gw:1/x?y=@z"),
    ("https://a@b@gw", "https://***@gw"), ("http://u:p@gw?x@y", "http://***@gw?x@y"),
    ("no-scheme@host", "no-scheme@host"),
])
def test_messages_show_a_url_without_its_user_info(url: str, shown: str) -> None:
    from headwater._config import _without_userinfo

    assert _without_userinfo(url) == shown
