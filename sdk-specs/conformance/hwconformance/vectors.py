"""Loading the vectors of `sdk-specs/vectors/` and validating them against `vector.schema.json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema_rs

SPECS = Path(__file__).resolve().parents[2]
REPO = SPECS.parent
VECTORS = SPECS / "vectors"
META_SCHEMA = VECTORS / "vector.schema.json"
CATEGORIES = ("encoding", "responses", "durability", "gateway", "fixtures")
SDK_CATEGORIES = ("encoding", "responses", "durability")


class VectorError(Exception):
    """A malformed vector file: the message names the file and what is wrong."""


_KIND = {"encoding": "sdk_vector", "responses": "sdk_vector", "durability": "sdk_vector",
         "gateway": "gateway_vector", "fixtures": "fixture_vector"}


def validate(doc: Any, where: str) -> list[dict[str, Any]]:
    """The vectors of one parsed file, checked against the meta-schema; raises `VectorError`.

    Each vector is checked against the definition of its category (from its id), so that the errors name
    the field at fault rather than "matches none of oneOf"; then the whole file against the meta-schema.
    """
    meta = json.loads(META_SCHEMA.read_text())
    items = doc if isinstance(doc, list) else [doc]
    for n, item in enumerate(items):
        vid = item.get("id") if isinstance(item, dict) else None
        kind = _KIND.get(str(vid).split("/", 1)[0]) if isinstance(vid, str) else None
        if kind is None:
            raise VectorError(f"{where}: vector {n} has no id of the form <category>/<name> "
                              f"(categories: {', '.join(_KIND)})")
        _errors(jsonschema_rs.validator_for({**meta, "oneOf": [{"$ref": f"#/$defs/{kind}"}]}), item, f"{where} {vid}")
    _errors(jsonschema_rs.validator_for(meta), doc, where)
    return items


def _errors(validator: Any, doc: Any, where: str) -> None:
    errors = [f"{e.message[:300]} (at /{'/'.join(str(p) for p in e.instance_path)})"
              for e in validator.iter_errors(doc)]
    if errors:
        raise VectorError(f"{where}: not a valid vector: " + "; ".join(errors[:5]))


def load(root: Path = VECTORS) -> list[dict[str, Any]]:
    """Every vector under `root` (`<category>/*.json`), in file then list order; ids are unique and start with
    their folder's name."""
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for path in sorted(root.glob("*/*.json")):
        where = str(path.relative_to(root))
        try:
            doc = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise VectorError(f"{where}: not JSON: {exc}") from None
        for vector in validate(doc, where):
            vid = vector["id"]
            if not vid.startswith(path.parent.name + "/"):
                raise VectorError(f"{where}: vector {vid} is not in folder {vid.split('/')[0]}/")
            if vid in seen:
                raise VectorError(f"{where}: vector id {vid} already used in {seen[vid]}")
            seen[vid] = where
            out.append(vector)
    if not out:
        raise VectorError(f"no vectors under {root}")
    return out


def category(vector: dict[str, Any]) -> str:
    """The vector's category (the first part of its id)."""
    return str(vector["id"]).split("/", 1)[0]
