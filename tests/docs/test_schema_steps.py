"""docs/schemas-and-registry.md's "Evolving a schema, step by step", done as written: on a copy of `schemas/` and
`tests/schemas/`, against a registry of its own (a private `_schemas` topic), the new page_view version of step 2
passes `check`, `diff`, the schema tests of step 6 and `register`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from stack.config import REPO_ROOT
from tests.registry.test_restart import registry_process

pytestmark = pytest.mark.integration
DOC = REPO_ROOT / "docs" / "schemas-and-registry.md"
CONFTEST = '''"""The registry of the documented steps."""
import os

import pytest


@pytest.fixture(scope="session")
def registry_url() -> str:
    return os.environ["STEPS_REGISTRY_URL"]
'''


def _private_schemas_topic(bootstrap: str) -> str:
    name = f"_schemas_docs_{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "min.insync.replicas": "1"}
    for fut in admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=config)]).values():
        fut.result(30)
    return name


def _copy(tmp: Path) -> Path:
    shutil.copytree(REPO_ROOT / "schemas", tmp / "schemas", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp / "tests").mkdir()
    (tmp / "tests" / "__init__.py").write_text("")
    (tmp / "tests" / "conftest.py").write_text(CONFTEST)
    shutil.copytree(REPO_ROOT / "tests" / "schemas", tmp / "tests" / "schemas",
                    ignore=shutil.ignore_patterns("__pycache__"))
    markers = "\n    ".join(["unit: unit", "integration: integration"])
    (tmp / "pytest.ini").write_text(f"[pytest]\naddopts = -p no:cacheprovider\nmarkers =\n    {markers}\n")
    return tmp


def test_a_new_page_view_version_passes_every_documented_step(stack_env: dict[str, str], tmp_path: Path) -> None:
    text = DOC.read_text()
    new_field = json.loads(re.search(r"```json\n(.*?)\n\s*```", text, re.DOTALL).group(1))  # type: ignore[union-attr]
    work = _copy(tmp_path / "work")
    topic = _private_schemas_topic(stack_env["KAFKA_BOOTSTRAP"])
    with registry_process({**stack_env, "SCHEMAS_TOPIC": topic}, tmp_path) as registry:
        env = {"PYTHONPATH": f"{work}:{REPO_ROOT}", "REGISTRY_URL": registry.url,
               "STEPS_REGISTRY_URL": registry.url, "PATH": "/usr/bin:/bin"}

        def step(*args: str) -> str:
            done = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=600, check=False)
            assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            return done.stdout

        step("-m", "schemas", "register")  # what `make up` did before step 1
        assert "headwater.events.page_view  [BACKWARD]  versions [1, 2]" in step("-m", "schemas", "list")
        # 2. the new version as a new file, with the documented field
        v3 = json.loads((work / "schemas/events/page_view/v2.avsc").read_text())
        v3["fields"][-1]["type"]["fields"].append(new_field)
        (work / "schemas/events/page_view/v3.avsc").write_text(json.dumps(v3, indent=2) + "\n")
        # 3. and 4.
        assert "compatible with headwater.events.page_view under BACKWARD" in step(
            "-m", "schemas", "check", "schemas/events/page_view/v3.avsc")
        diff = step("-m", "schemas", "diff", "schemas/events/page_view/v2.avsc", "schemas/events/page_view/v3.avsc")
        assert "+ properties.scroll_depth: [null, double] = null" in diff
        # 5. into the catalog
        catalog = json.loads((work / "schemas/catalog.json").read_text())
        catalog["page_view"]["versions"].append("events/page_view/v3.avsc")
        (work / "schemas/catalog.json").write_text(json.dumps(catalog, indent=2) + "\n")
        # 6. the schema tests, as the page says (they once asserted versions [1, 2] and failed here)
        assert " passed" in step("-m", "pytest", "tests/schemas", "-q")
        assert "+ properties.scroll_depth" in step("-m", "schemas", "diff", "page_view", "2", "3")
        # 7.
        assert "headwater.events.page_view  v3 -> id" in step("-m", "schemas", "register")
        assert "versions [1, 2, 3]" in step("-m", "schemas", "list")
