"""The data files each package ships are the ones the repository's other parts use (pure file checks)."""

from __future__ import annotations

import tomllib
import zipfile
from pathlib import Path

import pytest

from deploy import pipeline_artifact
from tests.packaging.installs import REPO_ROOT

pytestmark = pytest.mark.unit


def test_the_gateway_ships_the_batch_schema_of_the_spec() -> None:
    assert (REPO_ROOT / "gateway" / "batch.avsc").read_bytes() == (REPO_ROOT / "sdk-specs" / "batch.avsc").read_bytes()


@pytest.mark.parametrize("project", ["gateway", "registry", "spark_pipeline"])
def test_each_deployable_pins_its_dependencies_as_the_lock_does(project: str) -> None:
    deps = tomllib.loads((REPO_ROOT / project / "pyproject.toml").read_text())["project"]["dependencies"]
    lock = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep and not line.startswith("#"):
            lock[name.strip().lower().replace("_", "-").replace(".", "-")] = version.strip()
    for dep in deps:
        name, sep, version = dep.split(";")[0].partition("==")
        assert sep, f"{project}: {dep!r} is not pinned with =="
        assert lock[name.strip().lower().replace("_", "-").replace(".", "-")] == version.strip(), dep


def test_the_pipeline_zip_holds_the_packages_and_data_and_nothing_of_the_dev_tree(tmp_path: Path) -> None:
    zip_path = pipeline_artifact.build(tmp_path)
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        assert zf.read("spark_pipeline/data/nodes.csv") == (REPO_ROOT / "spark_pipeline/data/nodes.csv").read_bytes()
    assert {"spark_pipeline/__main__.py", "spark_pipeline/data/fairscheduler.xml", "common/registry_client.py",
            "common/envfile.py"} <= names
    assert {n.split("/")[0] for n in names} == {"spark_pipeline", "common"}
    assert not [n for n in names if "__pycache__" in n or n.endswith("pyproject.toml")]
    assert (tmp_path / "requirements.txt").read_text().splitlines()[0].startswith("pyspark==")
    assert "from spark_pipeline.__main__ import main" in (tmp_path / pipeline_artifact.ENTRY_NAME).read_text()
