"""Terminal-safe text: what a write-key holder put in a dead letter is printed with its control characters shown
as escapes, so it cannot move the cursor, clear the screen, retitle the window or reorder a line (bidi)."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls (U+009B is a one-character CSI on some terminals), and the
# Unicode format characters that reorder or hide text (bidi embeddings, overrides and isolates, zero widths).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_UNSAFE_IN_CELL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """`text` with every control and reordering character but newline and tab written as an escape."""
    return _UNSAFE.sub(_escape, text)


def cell(text: str) -> str:
    """One table cell: as `safe`, and newlines and tabs escaped too, so a row stays one line."""
    return _UNSAFE_IN_CELL.sub(_escape, text)


def safe_json(document: str) -> str:
    """A JSON text written with ensure_ascii=False, with the characters `safe` escapes written as \\uXXXX (JSON
    already escapes C0 controls; outside strings there is only structural white space)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
