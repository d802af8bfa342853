"""Makes what `rules list` and `rules show` print safe for a terminal: stored text is anyone's until Kafka has ACLs.

Rule SQL, `applied_by`, statuses (their errors quote SQL and Spark messages), skipped keys and registry schemas
come from topics and a registry that anyone who reaches them can write. `printable` shows every control and
format character (ESC, CR, backspace, bidirectional overrides, ...) as a visible `\\xNN` / `\\uNNNN` escape, so
no stored value can move the cursor, recolour, rewrite or reorder what the operator reads.
"""

from __future__ import annotations

import unicodedata

_HIDDEN = ("Cc", "Cf", "Co", "Cs", "Zl", "Zp")


def printable(text: object, *, multiline: bool = False, limit: int | None = None) -> str:
    """`text` with its control and format characters escaped (newlines and tabs kept when `multiline`), cut to
    `limit` characters (with `...`)."""
    out = []
    for c in str(text):
        if multiline and c in "\n\t":
            out.append(c)
        elif unicodedata.category(c) in _HIDDEN:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(c)
    shown = "".join(out)
    return shown if limit is None or len(shown) <= limit else shown[: max(0, limit - 3)] + "..."
