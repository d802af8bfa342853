"""Every command the README and docs/ show exists: make targets, `python -m` modules (and their subcommands),
console scripts, installable folders, and every relative link and repository path they name."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_MAKE = re.compile(r"(?<![\w-])make ([a-z][a-z0-9-]*)")
PROSE = {"it", "the", "a", "sure", "them", "its", "every", "one"}  # "make it ..." in a sentence
EXTERNAL_MODULES = {"pytest", "pip", "venv"}
_PY_M = re.compile(r"python -m ([A-Za-z_][\w.]*)((?: [a-z][a-z_-]*)?)")
_SCRIPT = re.compile(r"(?<![\w/-])(headwater-[a-z]+)(?![\w.*-])")  # not a name prefix such as `headwater-rules-*`
_PIP = re.compile(r"pip install (\./[\w-]+)")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
_PATH = re.compile(r"`((?:sdk-python|sdk-specs|gateway|registry|schemas|spark_pipeline|common|stack|demo|deploy|bench"
                   r"|loadtest|tests|docs)/[\w./-]*)`")


def text(page: Path) -> str:
    return page.read_text()


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def console_scripts() -> set[str]:
    scripts: set[str] = set()
    for pyproject in ROOT.glob("*/pyproject.toml"):
        scripts |= set(tomllib.loads(pyproject.read_text()).get("project", {}).get("scripts", {}))
    return scripts


def module_source(module: str) -> Path | None:
    """The file `python -m module` runs, found in the repository (no import)."""
    base = ROOT / Path(*module.split("."))
    for candidate in (base / "__main__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_make_targets_exist(page: Path) -> None:
    targets = make_targets()
    shown = set(_MAKE.findall(text(page))) - PROSE
    assert shown or page.name != "README.md", "the README shows no make command"
    assert shown <= targets, f"unknown make targets: {sorted(shown - targets)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_modules_and_their_subcommands_exist(page: Path) -> None:
    for module, word in _PY_M.findall(text(page)):
        if module in EXTERNAL_MODULES:
            continue
        source = module_source(module)
        assert source is not None, f"python -m {module}: no such module in the repository"
        sub = word.strip()
        code = "".join(p.read_text() for p in source.parent.glob("*.py")) if source.name == "__main__.py" \
            else source.read_text()
        if sub and "add_subparsers" in code:
            assert f'"{sub}"' in code, f"python -m {module} {sub}: no such subcommand"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_console_scripts_and_installable_folders_exist(page: Path) -> None:
    scripts = console_scripts()
    for script in _SCRIPT.findall(text(page)):
        assert script in scripts, f"{script}: no pyproject declares it"
    for folder in _PIP.findall(text(page)):
        assert (ROOT / folder / "pyproject.toml").is_file(), f"pip install {folder}: no pyproject.toml"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_repository_paths_exist(page: Path) -> None:
    for target in _LINK.findall(text(page)):
        if "://" not in target:
            assert (page.parent / target).exists(), f"broken link {target}"
    for shown in _PATH.findall(text(page)):
        path = shown.rstrip(".")
        if "<" in path or "*" in path:
            continue
        assert (ROOT / path).exists() or (ROOT / path.split(" ")[0]).exists(), f"no such path {path}"


def test_the_readme_stays_a_newcomers_page() -> None:
    lines = text(ROOT / "README.md").splitlines()
    assert len(lines) <= 170
    assert "make demo" in "\n".join(lines) and "## Send an event" in lines
