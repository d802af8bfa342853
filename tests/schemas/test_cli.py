"""The evolution CLI: diff offline, and register / check / list against the test stack's registry."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from schemas import load_catalog
from schemas.cli import main


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out), out.getvalue()


@pytest.mark.unit
def test_diff_of_catalog_versions_and_of_files() -> None:
    code, out = run("diff", "purchase", "1", "2")
    assert code == 0
    assert "+ properties.discount: [null, double] = null" in out
    et = load_catalog().event_types["page_view"]
    code, out = run("diff", str(et.versions[0]), str(et.versions[1]))
    assert code == 0 and "+ properties.load_time_ms" in out


@pytest.mark.unit
def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("diff", "nope", "1", "2")[0] == 2
    assert run("--registry", "http://127.0.0.1:9", "check", str(tmp_path / "missing.avsc"))[0] == 2
    assert "missing.avsc" in capsys.readouterr().err


@pytest.mark.integration
def test_register_list_and_check(registry_url: str, tmp_path: Path) -> None:
    """Driven by the catalog, so that it holds after a correct new version (docs/schemas-and-registry.md, step 6)."""
    page_view = load_catalog().event_types["page_view"]
    latest = page_view.versions[-1]
    code, out = run("--registry", registry_url, "register")
    assert code == 0, out
    assert f"headwater.events.page_view  v{page_view.latest_version} -> id" in out
    code, out = run("--registry", registry_url, "list")
    versions = list(range(1, page_view.latest_version + 1))
    assert code == 0 and f"headwater.events.page_view  [{page_view.compatibility}]  versions {versions}" in out

    code, out = run("--registry", registry_url, "check", str(latest))
    assert code == 0 and f"compatible with headwater.events.page_view under {page_view.compatibility}" in out

    candidate = json.loads(latest.read_text())  # the latest version plus a required field: never compatible
    candidate["fields"][-1]["type"]["fields"].append({"name": "test_required_field", "type": "double"})
    path = tmp_path / "candidate.avsc"
    path.write_text(json.dumps(candidate))
    code, out = run("--registry", registry_url, "check", str(path))
    assert code == 1
    assert "INCOMPATIBLE" in out and "properties.test_required_field" in out
    assert "reader_field_missing_default_value" in out
