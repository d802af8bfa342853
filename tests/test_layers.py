"""The arrows between the repository's parts point one way: deployed parts never import the development tools,
the stack never imports what runs on it (demo, load test, benchmarks), and `common/` imports no other part."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[1]
PARTS = {"gateway", "registry", "spark_pipeline", "console", "deadletter", "common", "schemas", "stack", "demo",
         "deploy", "loadtest", "bench", "tests", "headwater", "headwater_sql_functions", "hwconformance"}
DEV_TOOLS = {"stack", "demo", "deploy", "loadtest", "bench", "tests", "hwconformance"}
# part (folder) -> the parts it must never import
FORBIDDEN = {
    **{part: DEV_TOOLS for part in ("gateway", "registry", "spark_pipeline", "console", "deadletter", "schemas")},
    "sdk-python/src/headwater": PARTS - {"headwater"},
    "sql-functions/headwater_sql_functions": DEV_TOOLS,  # plugins of the pipeline: they import its plugin API
    "common": PARTS - {"common"},
    "stack": {"demo", "deploy", "loadtest", "bench", "tests", "hwconformance"},
    "loadtest": {"stack", "demo", "deploy", "bench", "tests"},
    "demo": {"deploy", "bench", "tests"},
}


def imported_parts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, top-level package) of every import in `path`, those inside functions included."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module.split(".")[0]


def violations(folder: str, forbidden: set[str]) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} imports {part}"
            for path in sorted((ROOT / folder).rglob("*.py"))
            for line, part in imported_parts(path) if part in forbidden]


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_arrow_points_backwards(folder: str) -> None:
    assert (ROOT / folder).is_dir(), f"{folder}/ is gone: update FORBIDDEN"
    assert not violations(folder, FORBIDDEN[folder])


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f() -> None:\n    from stack.config import REPO_ROOT\n")
    assert list(imported_parts(module)) == [(1, "os"), (4, "stack")]
