"""Env files (stack.env) are written atomically and readable by their owner only."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from common.envfile import read_env, write_env

pytestmark = pytest.mark.unit


def test_written_0600_whatever_the_umask_or_an_older_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "stack.env"
    path.parent.mkdir()
    path.write_text("OLD=1\n")
    path.chmod(0o644)
    path.with_suffix(".tmp").write_text("leftover")
    path.with_suffix(".tmp").chmod(0o666)
    old = os.umask(0)
    try:
        write_env(path, {"HEADWATER_WRITE_KEY": "hw_secret", "GATEWAY_URL": "https://127.0.0.1:8080"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_env(path) == {"HEADWATER_WRITE_KEY": "hw_secret", "GATEWAY_URL": "https://127.0.0.1:8080"}
    assert not path.with_suffix(".tmp").exists()
