"""The JVM class-data archive (JDK AppCDS) the rules CLI's plan-only JVM starts from: half its start-up time.

`rules apply` starts a JVM that loads some 20,000 of Spark's classes to plan one query: 3.3 s of its 6.4 s on an
idle 2-core host, most of it reading, parsing and verifying classes. The JDK can record the classes a run loaded
(`-XX:ArchiveClassesAtExit`, written when that JVM exits) and map them in at the next start
(`-XX:SharedArchiveFile`): the session then started in 1.5 s and the command took 3.2 s.

The first plan-only run of a set-up records the archive (that run is slower, and its JVM writes ~150 MB when it
exits); the runs after it use it. An archive is named by what it depends on (the `java` binary, pyspark, the
options), so a new JDK or pyspark records a new one. Its header is the last thing the JDK writes, so an archive
is promoted to its final name only once its header's magic number is there: a JVM killed while writing leaves a
part nobody uses. `-Xshare:auto` makes a JVM that cannot map an archive (a mismatch the name did not catch) start
without it, never fail. HEADWATER_CLASS_ARCHIVE=0 turns it off; the folder is HEADWATER_CACHE_DIR (default
`$XDG_CACHE_HOME/headwater` or `~/.cache/headwater`); a folder that cannot be written means no archive.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

import pyspark

from spark_pipeline.config import switch

log = logging.getLogger("spark_pipeline.rules")
DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")  # 0xf00baba8, little-endian: a JDK dynamic archive whose header is written
PART_SUFFIX = ".part"
STALE_PART_S = 3600.0  # a part this old was left by a JVM that died while writing it


def cache_dir(env: Mapping[str, str]) -> Path:
    if env.get("HEADWATER_CACHE_DIR"):
        return Path(env["HEADWATER_CACHE_DIR"])
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "headwater"


def java_binary(env: Mapping[str, str]) -> Path | None:
    """The `java` spark-submit runs (JAVA_HOME's, else the PATH's), resolved."""
    if env.get("JAVA_HOME"):
        candidate = Path(env["JAVA_HOME"]) / "bin" / "java"
        return candidate.resolve() if candidate.exists() else None
    found = shutil.which("java", path=env.get("PATH"))
    return Path(found).resolve() if found else None


def archive_key(java: Path, java_options: str) -> str:
    """What an archive depends on: the JVM (path, size and time of its binary and module image), pyspark (whose
    jars are the class path) and the JVM options (a flag such as the collector changes what may be mapped)."""
    modules = java.parent.parent / "lib" / "modules"
    parts = [str(java), pyspark.__version__, java_options]
    for path in (java, modules):
        if path.exists():
            st = path.stat()
            parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def complete(path: Path) -> bool:
    """Whether `path` holds a dynamic archive whose header was written (the JDK writes it last)."""
    try:
        with path.open("rb") as f:
            return f.read(len(DYNAMIC_MAGIC)) == DYNAMIC_MAGIC
    except OSError:
        return False


def promote_parts(folder: Path, final: Path) -> None:
    """Give `final` the first complete part recorded for it; remove the parts of JVMs that died writing."""
    now = time.time()
    for part in sorted(folder.glob(f"{final.stem}.*{PART_SUFFIX}")):
        try:
            if not final.exists() and complete(part):
                os.replace(part, final)
                log.info("JVM class archive recorded: %s", final)
            elif now - part.stat().st_mtime > STALE_PART_S:
                part.unlink()
        except OSError as exc:
            log.debug("class archive part %s: %s", part, exc)


def archive_path(base_options: str, env: Mapping[str, str] | None = None) -> Path | None:
    """Where the archive of a JVM started with `base_options` is (or will be); None: no archive."""
    env = os.environ if env is None else env
    if not switch(env, "HEADWATER_CLASS_ARCHIVE", True):
        return None
    java = java_binary(env)
    if java is None:
        return None
    folder = cache_dir(env)
    if any(c.isspace() or c in "\"'" for c in str(folder)):  # Spark splits the options at spaces
        log.debug("no JVM class archive: the cache folder %s has spaces or quotes", folder)
        return None
    return folder / f"rules-cli-{archive_key(java, base_options)}.jsa"


def recorded(base_options: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the archive for `base_options` is written (promoted or not yet)."""
    final = archive_path(base_options, env)
    return final is not None and (final.exists() or any(complete(p) for p in
                                                        final.parent.glob(f"{final.stem}.*{PART_SUFFIX}")))


def java_options(base_options: str, env: Mapping[str, str] | None = None) -> str:
    """`base_options` plus the archive's: use the recorded archive, or record one when this JVM exits."""
    final = archive_path(base_options, env)
    if final is None:
        return base_options
    folder = final.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        promote_parts(folder, final)
        if final.exists():
            return f"{base_options} -XX:SharedArchiveFile={final}"
        probe = folder / f".probe-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        log.debug("no JVM class archive (%s: %s)", folder, exc)
        return base_options
    part = folder / f"{final.stem}.{uuid.uuid4().hex[:12]}{PART_SUFFIX}"
    log.info("recording the JVM's classes for the next runs (%s, written as this command exits)", final)
    return f"{base_options} -XX:ArchiveClassesAtExit={part}"
