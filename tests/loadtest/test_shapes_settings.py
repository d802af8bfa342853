"""Unit tests of the load shapes and of the settings read from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.settings import LoadSettings, SettingsError
from loadtest.shapes import ramp, soak, spike, steps

pytestmark = pytest.mark.unit


def test_soak_holds_then_stops() -> None:
    plan = soak(100, 60, 10)
    assert plan(0) == plan(59.9) == (100, 10) and plan(60) is None


def test_ramp_rises_to_all_users_by_half_time() -> None:
    plan = ramp(100, 60, 10)
    counts = [plan(t) for t in (0, 15, 30, 45)]
    assert [c[0] for c in counts if c] == [1, 50, 100, 100]
    assert plan(61) is None


def test_spike_jumps_to_all_users_in_the_middle() -> None:
    plan = spike(100, 100, 10)
    assert plan(10) == (25, 10) and plan(50) == (100, 100.0) and plan(70) == (25, 10) and plan(100) is None


def test_steps_climb_in_equal_parts() -> None:
    plan = steps(100, 50, 10, count=5)
    assert [plan(t) for t in (0, 10, 20, 30, 49)] == [(20, 10), (40, 10), (60, 10), (80, 10), (100, 10)]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "stack.env").write_text("GATEWAY_URL=http://127.0.0.1:1/\nHEADWATER_WRITE_KEY=k\n")
    return {"HEADWATER_LT_STACK_ENV": str(tmp_path / "stack.env"), "HEADWATER_LT_RUNS_DIR": str(tmp_path), **extra}


def test_settings_from_stack_env_and_derived_interval(tmp_path: Path) -> None:
    s = LoadSettings.from_env(_env(tmp_path, HEADWATER_LT_NODES="100000", HEADWATER_LT_RATE="4",
                                   HEADWATER_LT_BATCH="40", HEADWATER_LT_RUN_ID="11111111-1111-4111-8111-111111111111"))
    assert s.gateway_url == "http://127.0.0.1:1" and s.write_key == "k"
    assert s.interval_s == 10.0 and s.offered_events_per_s == 400_000
    assert s.run_dir == tmp_path / "11111111-1111-4111-8111-111111111111"


@pytest.mark.parametrize(("name", "value", "message"), [
    ("HEADWATER_LT_NODES", "0", "HEADWATER_LT_NODES=0 is outside"),
    ("HEADWATER_LT_BATCH", "41", "HEADWATER_LT_BATCH=41 is outside"),
    ("HEADWATER_LT_BATCH", "2.5", "not an integer"),
    ("HEADWATER_LT_RATE", "fast", "not a number"),
    ("HEADWATER_LT_RATE", "nan", "outside"),
    ("HEADWATER_LT_SHAPE", "wave", "HEADWATER_LT_SHAPE='wave'"),
    ("HEADWATER_LT_RUN_ID", "run-1", "not a UUID"),
    ("HEADWATER_LT_USERS", "5000", "exceeds HEADWATER_LT_NODES"),
])
def test_bad_settings_name_the_variable(tmp_path: Path, name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        LoadSettings.from_env(_env(tmp_path, **{name: value}))


def test_missing_gateway_is_reported(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="GATEWAY_URL"):
        LoadSettings.from_env({"HEADWATER_LT_STACK_ENV": str(tmp_path / "none.env")})


def test_a_secure_stacks_ca_is_taken_from_stack_env_and_must_be_readable(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = _env(tmp_path)
    stack_env = Path(env["HEADWATER_LT_STACK_ENV"])
    stack_env.write_text(stack_env.read_text() + f"HEADWATER_CA_BUNDLE={ca}\n")
    assert LoadSettings.from_env(env).ca_bundle == str(ca)
    with pytest.raises(SettingsError, match="HEADWATER_CA_BUNDLE"):
        LoadSettings.from_env({**env, "HEADWATER_CA_BUNDLE": str(tmp_path / "missing.pem")})
