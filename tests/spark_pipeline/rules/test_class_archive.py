"""The rules CLI's JVM class archive: recorded by the first plan-only run, promoted only when complete, used by the
next run; and `rules apply` as a real process twice over the test stack (unit tests on files; one stack test)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from spark_pipeline.rules import class_archive, store
from tests.spark_pipeline.truth import new_topic

REPO = Path(__file__).resolve().parents[3]
BASE = "-XX:+UseSerialGC"


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HEADWATER_CACHE_DIR": str(tmp_path / "cache"), **extra}


def option(options: str, flag: str) -> Path:
    return Path(next(o for o in options.split() if o.startswith(flag)).split("=", 1)[1])


def test_the_first_run_records_a_part_and_a_complete_part_becomes_the_archive(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    first = class_archive.java_options(BASE, env)
    assert first.startswith(BASE + " ")
    part = option(first, "-XX:ArchiveClassesAtExit=")
    assert part.parent == tmp_path / "cache" and part.name.endswith(".part")
    # The JVM has not written it yet (or died while writing: the header, written last, is still zeros).
    part.write_bytes(b"\0" * 64)
    assert "-XX:ArchiveClassesAtExit=" in class_archive.java_options(BASE, env)
    part.write_bytes(class_archive.DYNAMIC_MAGIC + b"\0" * 60)
    used = option(class_archive.java_options(BASE, env), "-XX:SharedArchiveFile=")
    assert used.exists() and not part.exists() and used.name.startswith("rules-cli-") and used.suffix == ".jsa"
    assert option(class_archive.java_options(BASE, env), "-XX:SharedArchiveFile=") == used


def test_an_old_incomplete_part_is_removed(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    part = option(class_archive.java_options(BASE, env), "-XX:ArchiveClassesAtExit=")
    part.write_bytes(b"\0" * 64)
    old = time.time() - class_archive.STALE_PART_S - 60
    os.utime(part, (old, old))
    class_archive.java_options(BASE, env)
    assert not part.exists()


def test_other_options_or_another_java_mean_another_archive(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    java = class_archive.java_binary(env)
    assert java is not None
    key = class_archive.archive_key(java, BASE)
    assert key != class_archive.archive_key(java, BASE + " -XX:TieredStopAtLevel=1")
    fake_home = tmp_path / "jdk"
    (fake_home / "bin").mkdir(parents=True)
    (fake_home / "bin" / "java").symlink_to(java)
    assert class_archive.java_binary({**env, "JAVA_HOME": str(fake_home)}) == java.resolve()
    assert class_archive.java_binary({**env, "JAVA_HOME": str(tmp_path / "none")}) is None


@pytest.mark.parametrize("case", ["off", "unwritable", "spaces"])
def test_no_archive_leaves_the_options_as_they_were(tmp_path: Path, case: str) -> None:
    if case == "off":
        env = env_for(tmp_path, HEADWATER_CLASS_ARCHIVE="0")
    elif case == "unwritable":
        blocker = tmp_path / "file"
        blocker.write_text("not a folder")
        env = {**env_for(tmp_path), "HEADWATER_CACHE_DIR": str(blocker / "cache")}
    else:
        env = {**env_for(tmp_path), "HEADWATER_CACHE_DIR": str(tmp_path / "a cache")}
    assert class_archive.java_options(BASE, env) == BASE


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_rules_apply_as_a_process_records_then_uses_the_archive(tmp_path: Path, bootstrap: str,
                                                                 registry_url: str) -> None:
    cache = tmp_path / "cache"
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "REGISTRY_URL": registry_url,
           "EVENTS_TOPIC": new_topic(bootstrap, "test.rules.archive"), "HEADWATER_CACHE_DIR": str(cache),
           "PYTHONPATH": str(REPO)}
    env.pop("SPARK_MASTER", None)
    sql = tmp_path / "big.sql"
    sql.write_text("SELECT * FROM purchase WHERE total > 1000\n")
    names = [f"archive_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    try:
        outputs = []
        for name in names:
            done = subprocess.run([sys.executable, "-m", "spark_pipeline", "--env-file", str(tmp_path / "none.env"),
                                   "rules", "apply", str(sql), "--name", name], check=False, cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stderr[-2000:]
            outputs.append(done.stdout + done.stderr)
            # The JVM writes the archive as it exits, after the Python process: wait for a complete part.
            deadline = time.monotonic() + 120
            while not any(class_archive.complete(p) for p in cache.glob("*")) and time.monotonic() < deadline:
                time.sleep(0.5)
        assert "recording the JVM's classes" in outputs[0]
        assert "JVM class archive recorded" in outputs[1] and "recording" not in outputs[1]
        assert len(list(cache.glob("rules-cli-*.jsa"))) == 1
    finally:
        rules = store.RuleStore(bootstrap)
        try:
            for name in names:
                if name in rules.latest_rules():
                    rules.delete(name)
        finally:
            rules.close()
