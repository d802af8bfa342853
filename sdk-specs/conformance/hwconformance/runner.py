"""Running the vectors against every registered SDK (sdks.json) and the gateway, and reporting the results."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .driverproc import DriverError, DriverProcess
from .results import NA, Result, expected_failures, report, settle
from .sdkcase import MANDATORY, Failed, Sdk, needs_missing, run_vector
from .vectors import REPO, SDK_CATEGORIES, SPECS, category

SDKS_FILE = SPECS / "conformance" / "sdks.json"


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


def run_sdk(sdk: Sdk, vectors: list[dict[str, Any]], out: TextIO = sys.stdout,
            runner: Callable[[dict[str, Any], Sdk], Any] = run_vector) -> list[Result]:
    """Every SDK vector against `sdk`."""
    results: list[Result] = []
    chosen = [v for v in vectors if category(v) in SDK_CATEGORIES]
    problem = prepare(sdk)
    for vector in chosen:
        start = time.monotonic()
        if problem is not None:
            result = settle(sdk.name, vector["id"], False, problem, xfails=sdk.expected_failures, seconds=0.0)
        elif needs_missing(vector, sdk):
            result = Result(sdk.name, vector["id"], NA, "needs " + ", ".join(needs_missing(vector, sdk)))
        else:
            try:
                runner(vector, sdk)
                ok, detail = True, ""
            except Failed as exc:
                ok, detail = False, str(exc)
            result = settle(sdk.name, vector["id"], ok, detail, xfails=sdk.expected_failures,
                            seconds=time.monotonic() - start)
        report(result, out)
        results.append(result)
    return results
