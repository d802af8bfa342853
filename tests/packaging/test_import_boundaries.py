"""The arrows between the repository's parts point one way: nothing deployed imports the development tree, `common`
imports none of the services, the local stack imports nothing that runs on it (demo, load test, benchmarks), the
load test not the stack and the benchmarks not the tests (static check of every import statement, so it also
covers imports inside functions)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.packaging.installs import REPO_ROOT

pytestmark = pytest.mark.unit
DEV_ONLY = {"stack", "demo", "deploy", "bench", "tests", "loadtest"}
SERVICES = {"gateway", "registry", "spark_pipeline", "schemas", "console", "deadletter", "subscribe"}
# What each deployable package may import of this repository (the dead-letter tool validates with the gateway's code).
ALLOWED = {"gateway": {"gateway", "common"}, "registry": {"registry", "common"},
           "spark_pipeline": {"spark_pipeline", "common"}, "schemas": {"schemas", "common"}, "common": {"common"},
           "console": {"console", "common"}, "deadletter": {"deadletter", "gateway", "common"},
           "subscribe": {"subscribe", "common"}}
# What each development part must not import: the stack runs the services and nothing that runs on it; the load
# test and the demo run against any stack (its stack.env), the demo through the load test's event factory; the
# benchmarks are tools of their own (the tests may import them, never the other way).
FORBIDDEN = {"stack": {"demo", "deploy", "loadtest", "bench", "tests"},
             "loadtest": {"stack", "demo", "deploy", "bench", "tests"},
             "demo": {"deploy", "bench", "tests"}, "deploy": {"stack", "demo", "loadtest", "bench", "tests"},
             "bench": {"tests"}}


def repo_imports(package: str) -> dict[str, set[str]]:
    """Top-level repository packages imported by each module of `package`."""
    local = DEV_ONLY | SERVICES | {"common"}
    found: dict[str, set[str]] = {}
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        if "build" in path.parts:
            continue
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(Path(path).relative_to(REPO_ROOT))] = names & local
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_deployed_packages_import_only_what_they_ship(package: str) -> None:
    for module, names in repo_imports(package).items():
        assert names <= ALLOWED[package], f"{module} imports {sorted(names - ALLOWED[package])}"


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_no_development_arrow_points_backwards(part: str) -> None:
    """`stack/demo.py` imported the load test, which imported the stack: the one arrow that ran backwards."""
    for module, names in repo_imports(part).items():
        assert not names & FORBIDDEN[part], f"{module} imports {sorted(names & FORBIDDEN[part])}"


def test_the_check_sees_imports_inside_functions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "part").mkdir()
    (tmp_path / "part" / "m.py").write_text("import os\n\ndef f() -> None:\n    from stack.config import X\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert repo_imports("part") == {"part/m.py": {"stack"}}
