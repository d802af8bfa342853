"""Reads writer and reader schemas from any Confluent-compatible schema registry (REST), and registers one.

The pipeline needs, per schema id on the wire, the writer schema and its subject, and per subject the
latest version as the reader schema. `RegistryClient.snapshot()` fetches all of that for the subjects of
one prefix (the event types) in one pass; the decoder is built from the snapshot, so a new version is
picked up by taking a new snapshot (see `job.py`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(RuntimeError):
    """The registry could not be reached or answered something unexpected."""


@dataclass(frozen=True)
class WriterSchema:
    """One registered schema as the wire names it: id, subject, version and the schema text."""

    schema_id: int
    subject: str
    version: int
    schema: str


@dataclass(frozen=True)
class SchemaSnapshot:
    """Every writer schema of the event subjects, the reader (latest) per subject, and ids known to be bad."""

    writers: dict[int, WriterSchema]
    readers: dict[str, WriterSchema]
    bad_ids: frozenset[int] = field(default_factory=frozenset)

    def fingerprint(self) -> tuple[tuple[int, ...], frozenset[int]]:
        """Equal fingerprints mean the same decoder; a new version or subject changes it."""
        return tuple(sorted(self.writers)), self.bad_ids


class RegistryClient:
    """A small blocking client of the Confluent Schema Registry REST API (no caching: snapshots are rare)."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise RegistryError(f"{method} {path}: HTTP {exc.code} {exc.read()[:300]!r}") from exc
        except (OSError, ValueError) as exc:
            raise RegistryError(f"{method} {path}: {exc}") from exc

    @staticmethod
    def _q(subject: str) -> str:
        return urllib.parse.quote(subject, safe="")

    def subjects(self) -> list[str]:
        return list(self._call("GET", "/subjects") or [])

    def versions(self, subject: str) -> list[WriterSchema]:
        out = []
        for v in self._call("GET", f"/subjects/{self._q(subject)}/versions") or []:
            got = self._call("GET", f"/subjects/{self._q(subject)}/versions/{v}")
            if got is not None:
                out.append(WriterSchema(int(got["id"]), subject, int(got["version"]), str(got["schema"])))
        return out

    def exists(self, schema_id: int) -> bool:
        return self._call("GET", f"/schemas/ids/{schema_id}") is not None

    def register(self, subject: str, schema: str) -> int:
        """Register `schema` under `subject` (idempotent in the registry) and return its id."""
        got = self._call("POST", f"/subjects/{self._q(subject)}/versions", {"schema": schema})
        if got is None or "id" not in got:
            raise RegistryError(f"register {subject}: unexpected answer {got!r}")
        return int(got["id"])

    def snapshot(self, prefix: str, bad_ids: frozenset[int] = frozenset()) -> SchemaSnapshot:
        """All versions of the subjects starting with `prefix`; the reader of each is its newest version."""
        writers: dict[int, WriterSchema] = {}
        readers: dict[str, WriterSchema] = {}
        for subject in sorted(s for s in self.subjects() if s.startswith(prefix)):
            versions = self.versions(subject)
            if not versions:
                continue
            for w in versions:
                # The same schema under two subjects has one id; the first subject (sorted) wins.
                writers.setdefault(w.schema_id, w)
            readers[subject] = max(versions, key=lambda w: w.version)
        return SchemaSnapshot(writers, readers, frozenset(bad_ids - set(writers)))
