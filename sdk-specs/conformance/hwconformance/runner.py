"""Running the vectors against every registered SDK (sdks.json) and the gateway, and reporting the results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from .driverproc import DriverError, DriverProcess
from .results import NA, Result, expected_failures, report, settle
from .sdkcase import MANDATORY, Failed, Sdk, needs_missing, run_vector
from .vectors import REPO, SDK_CATEGORIES, SPECS, category

SDKS_FILE = SPECS / "conformance" / "sdks.json"
# Vectors run side by side, each with its own mock gateway (own port) and its own driver process in its own
# temporary directory; most of a vector's time is waiting (linger, backoff, Retry-After), not CPU.
JOBS_ENV = "HEADWATER_CONFORMANCE_JOBS"
DEFAULT_JOBS = 4


def load_sdks(path: Path = SDKS_FILE) -> list[Sdk]:
    """The registered SDKs."""
    entries: Any = json.loads(path.read_text())
    sdks = []
    for e in entries:
        sdks.append(Sdk(name=e["name"], driver=list(e["driver"]), build=e.get("build"),
                        expected_failures=expected_failures(e.get("expected_failures"))))
    return sdks


def prepare(sdk: Sdk) -> str | None:
    """Build the SDK's driver and read its capabilities; an error message if that failed."""
    if sdk.build:
        done = subprocess.run(sdk.build, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            return f"build failed ({done.returncode}): {(done.stderr or done.stdout)[-2000:]}"
    with tempfile.TemporaryDirectory(prefix="hw-conformance-") as tmp:
        driver = DriverProcess(sdk.driver, REPO, Path(tmp) / "stderr")
        try:
            hello = driver.call({"cmd": "hello"})
        except DriverError as exc:
            return f"hello: {exc}"
        finally:
            driver.stop()
    if not hello.get("ok"):
        return f"hello failed: {hello}"
    sdk.capabilities = frozenset(hello.get("capabilities", []))
    missing = [c for c in MANDATORY if c not in sdk.capabilities]
    if missing:
        print(f"{sdk.name}: mandatory capabilities missing: {', '.join(missing)} (their vectors will fail)")
    return None


def jobs_from_env() -> int:
    """How many vectors run at once: HEADWATER_CONFORMANCE_JOBS (>= 1), else DEFAULT_JOBS."""
    raw = os.environ.get(JOBS_ENV, "").strip()
    if not raw:
        return DEFAULT_JOBS
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{JOBS_ENV} must be a whole number >= 1, not {raw!r}")
    return int(raw)


def run_sdk(sdk: Sdk, vectors: list[dict[str, Any]], out: TextIO = sys.stdout,
            runner: Callable[[dict[str, Any], Sdk], Any] = run_vector, jobs: int | None = None) -> list[Result]:
    """Every SDK vector against `sdk`, `jobs` at a time (default: jobs_from_env()); results in vector order."""
    chosen = [v for v in vectors if category(v) in SDK_CATEGORIES]
    problem = prepare(sdk)

    def one(vector: dict[str, Any]) -> Result:
        start = time.monotonic()
        if problem is not None:
            return settle(sdk.name, vector["id"], False, problem, xfails=sdk.expected_failures, seconds=0.0)
        if needs_missing(vector, sdk):
            return Result(sdk.name, vector["id"], NA, "needs " + ", ".join(needs_missing(vector, sdk)))
        try:
            runner(vector, sdk)
            ok, detail = True, ""
        except Failed as exc:
            ok, detail = False, str(exc)
        return settle(sdk.name, vector["id"], ok, detail, xfails=sdk.expected_failures,
                      seconds=time.monotonic() - start)

    with ThreadPoolExecutor(max_workers=jobs or jobs_from_env(), thread_name_prefix=f"vectors-{sdk.name}") as pool:
        results = list(pool.map(one, chosen))
    for result in results:
        report(result, out)
    return results
