"""`import headwater` stays small: fastavro (the `avro` extra) and asyncio load only when used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # starts an interpreter


def loaded_after(code: str) -> list[str]:
    probe = f"import sys\n{code}\nimport json\n" \
            "print(json.dumps(sorted(m for m in ('asyncio', 'fastavro', 'tenacity') if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_import_headwater_loads_neither_asyncio_nor_fastavro() -> None:
    assert loaded_after("import headwater") == []
    assert loaded_after("import headwater\nheadwater.Client('http://127.0.0.1:9', 'k', disabled=True).close()") == []


def test_async_client_and_avro_load_on_use() -> None:
    assert "asyncio" in loaded_after("import headwater\nheadwater.AsyncClient")
    assert "fastavro" in loaded_after("from headwater import _avro")
