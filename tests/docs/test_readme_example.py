"""The README's Python example, as printed, delivers its event to the real gateway of the test stack."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


def python_example() -> str:
    (code,) = re.findall(r"\*\*Python\*\*.*?```python\n(.*?)```", README.read_text(), re.DOTALL)
    return str(code)


def test_the_python_example_is_acknowledged(gateway_url: str, write_key: str) -> None:
    code = python_example()
    assert '"http://127.0.0.1:8080", "hw_your_write_key"' in code
    namespace: dict[str, Any] = {}
    exec(code.replace("http://127.0.0.1:8080", gateway_url).replace("hw_your_write_key", write_key), namespace)
    metrics = namespace["client"].metrics()
    assert metrics.acknowledged == 1 and metrics.rejected == 0, metrics
