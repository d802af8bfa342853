"""Every Python snippet of sdk-python/README.md runs as written, against a local protocol server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .local_gateway import LocalGateway

pytestmark = pytest.mark.integration
README = Path(__file__).parents[2] / "sdk-python" / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_snippets() -> None:
    assert len(SNIPPETS) >= 4


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_runs_as_written(tmp_path: Path, index: int) -> None:
    code = SNIPPETS[index]
    with LocalGateway() as gw:
        env = {**os.environ, "HEADWATER_ENDPOINT": gw.url, "HEADWATER_WRITE_KEY": "readme-key"}
        env.pop("GATEWAY_URL", None)
        done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, f"snippet {index}:\n{code}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        tracked = re.findall(r'\.track\("([a-z_]+)"', code)
        if "disabled=True" not in code and "MemoryTransport" not in code:  # a fake transport: the snippet asserts
            assert sorted(e["event_type"] for e in gw.events) == sorted(tracked), code
