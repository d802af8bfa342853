"""Each SDK installed into a fresh project exactly as its README says, and its quick start run against the stack:
the quick start exits 0 (it checks close) and its events are read back from Kafka."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.sdk_events import EVENTS_TOPIC, Decoder
from tests.sdk_install.readme import block_with, blocks
from tests.support.kafka import consume_all, end_offsets

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
GO = shutil.which("go") or "/usr/local/go/bin/go"
PAGE_VIEW_PATH = "/boots"  # the quick starts' page_view


def user_env(stack_env: dict[str, str]) -> dict[str, str]:
    """A user's shell: no HEADWATER_* of ours but the two the READMEs name; tools found on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HEADWATER_", "VIRTUAL_ENV")) and k not in ("GATEWAY_URL", "REGISTRY_URL")}
    env.update(HEADWATER_ENDPOINT=stack_env["GATEWAY_URL"], HEADWATER_WRITE_KEY=stack_env["HEADWATER_WRITE_KEY"],
               GOTOOLCHAIN="local", GOFLAGS="-mod=mod", NO_UPDATE_NOTIFIER="1", npm_config_fund="false",
               npm_config_audit="false", npm_config_update_notifier="false")
    env["PATH"] = os.pathsep.join([str(Path(GO).parent), env.get("PATH", "")])
    return env


def sh(script: str, cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    """Run a README block as the user would (bash, in the project), with the checkout's path filled in."""
    script = script.replace("/path/to/headwater", str(ROOT))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"$ {script}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def delivered(stack_env: dict[str, str], start: dict[int, int], want: Callable[[dict[str, Any]], bool]) -> int:
    """How many committed events after `start` match `want`."""
    decode = Decoder(stack_env["REGISTRY_URL"])
    records = consume_all(stack_env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC, "read_committed", timeout_s=30, start=start)
    values = [m.value() for m in records]
    return sum(1 for value in values if value is not None and want(decode(value)))


def is_page_view(record: dict[str, Any]) -> bool:
    return bool(record["event_type"] == "page_view" and record["properties"]["path"] == PAGE_VIEW_PATH)


def is_server_metric(record: dict[str, Any]) -> bool:
    return bool(record["event_type"] == "server_metric" and record["properties"]["host"] == "web-1")


def test_python_sdk_installs_into_a_new_venv_and_its_quick_start_delivers(
        stack_env: dict[str, str], tmp_path: Path) -> None:
    readme = ROOT / "sdk-python" / "README.md"
    env = user_env(stack_env)
    sh(block_with(readme, "Install", "sh", "/path/to/headwater/sdk-python"), tmp_path, env)
    (tmp_path / "quickstart.py").write_text(blocks(readme, "Quick start", "python")[0], encoding="utf-8")
    start = end_offsets(stack_env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    sh(".venv/bin/python quickstart.py", tmp_path, env, timeout=60)
    assert delivered(stack_env, start, is_page_view) == 1


def test_go_sdk_is_required_from_the_checkout_and_its_quick_start_delivers(
        stack_env: dict[str, str], tmp_path: Path) -> None:
    readme = ROOT / "sdk-go" / "README.md"
    env = user_env(stack_env)
    sh(block_with(readme, "Install", "sh", "/path/to/headwater/sdk-go"), tmp_path, env)
    main, from_env = blocks(readme, "Quick start", "go")[:2]
    start = end_offsets(stack_env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    for program in (main, from_env):
        (tmp_path / "main.go").write_text(program, encoding="utf-8")
        sh(f"{GO} run .", tmp_path, env, timeout=300)
    assert delivered(stack_env, start, is_page_view) == 1
    assert delivered(stack_env, start, is_server_metric) == 1


@pytest.mark.parametrize("route", ["folder", "tarball, install scripts off"])
def test_typescript_sdk_installs_without_a_build_and_its_quick_starts_deliver(
        route: str, stack_env: dict[str, str], tmp_path: Path) -> None:
    readme = ROOT / "sdk-typescript" / "README.md"
    env = user_env(stack_env)
    sh("npm init -y >/dev/null", tmp_path, env)
    if route == "folder":
        sh(block_with(readme, "Install", "sh", "npm install /path/to/headwater/sdk-typescript"), tmp_path, env)
        codec = "zstd"
    else:  # as pnpm or a locked-down CI installs it: the optional zstd binding is not built, gzip is sent
        tarball = block_with(readme, "Install", "sh", "npm pack")
        sh(tarball.replace("npm install ", "npm install --ignore-scripts "), tmp_path, env)
        codec = "gzip"
    esm, cjs = blocks(readme, "Quick start", "js")[:2]
    (tmp_path / "quickstart.mjs").write_text(esm, encoding="utf-8")
    (tmp_path / "quickstart.cjs").write_text(cjs, encoding="utf-8")
    (tmp_path / "codec.mjs").write_text(
        'import { Headwater } from "@headwater/node";\n'
        'const h = Headwater.fromEnv();\nconsole.log("encoding=" + (await h.codec()).encoding);\n'
        "await h.close(1000);\n", encoding="utf-8")
    assert f"encoding={codec}" in sh("node codec.mjs", tmp_path, env, timeout=60)
    start = end_offsets(stack_env["KAFKA_BOOTSTRAP"], EVENTS_TOPIC)
    sh("node quickstart.mjs && node quickstart.cjs", tmp_path, env, timeout=60)
    assert delivered(stack_env, start, is_page_view) == 1
    assert delivered(stack_env, start, is_server_metric) == 1
