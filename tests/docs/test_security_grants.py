"""docs/security.md's table of principals says what stack/kafka_acls.py grants (every resource and operation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stack.kafka_acls import grants

pytestmark = pytest.mark.unit
DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


@pytest.mark.parametrize(("principal", "granted"), list(grants().items()))
def test_the_documented_row_names_every_grant(principal: str, granted: tuple[object, ...]) -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith(f"| `{principal}` |")]
    assert len(rows) == 1, f"docs/security.md has no row for {principal}"
    for g in grants()[principal]:
        assert f"`{g.name}{'*' if g.prefixed else ''}`" in rows[0], (principal, g)
        assert all(op in rows[0] for op in g.operations), (principal, g)
