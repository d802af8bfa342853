"""Nothing deployed imports the development tree, and `common` imports none of the services (static check of
every import statement, so it also covers imports inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.packaging.installs import REPO_ROOT

pytestmark = pytest.mark.unit
DEV_ONLY = {"stack", "bench", "tests", "loadtest"}
SERVICES = {"gateway", "registry", "spark_pipeline", "schemas", "console", "deadletter"}
# What each deployable package may import of this repository (the dead-letter tool validates with the gateway's code).
ALLOWED = {"gateway": {"gateway", "common"}, "registry": {"registry", "common"},
           "spark_pipeline": {"spark_pipeline", "common"}, "schemas": {"schemas", "common"}, "common": {"common"},
           "console": {"console", "common"}, "deadletter": {"deadletter", "gateway", "common"}}


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
