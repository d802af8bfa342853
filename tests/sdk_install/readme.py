"""Reads an SDK README's fenced code blocks by section, so tests run exactly what a user is told to run."""

from __future__ import annotations

import re
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def section(readme: Path, title: str) -> str:
    """The text under the `## <title>` heading, up to the next `## ` heading."""
    text = readme.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def blocks(readme: Path, title: str, lang: str) -> list[str]:
    """Every fenced block of language `lang` in the section `title`, in order."""
    return [body for fence_lang, body in _FENCE.findall(section(readme, title)) if fence_lang == lang]


def block_with(readme: Path, title: str, lang: str, needle: str) -> str:
    """The one block of `lang` in `title` that contains `needle` (a test fails if the README lost it)."""
    found = [b for b in blocks(readme, title, lang) if needle in b]
    if len(found) != 1:
        raise AssertionError(f"{readme.name} § {title}: {len(found)} `{lang}` blocks contain {needle!r}, wanted 1")
    return found[0]
