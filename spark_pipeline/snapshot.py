"""Takes a snapshot of the event schemas in the registry: per schema id the writer schema, per subject the reader.

The pipeline needs, per schema id on the wire, the writer schema and its subject, and per subject the
latest version as the reader schema. `take_snapshot()` fetches all of that for the subjects of one prefix
(the event types) in one pass over `common.registry_client`; the decoder is built from the snapshot, so a
new version is picked up by taking a new snapshot (see `supervisor.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from common.registry_client import RegistryClient, RegistryClientError


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

    def older_readers(self) -> list[str]:
        """The subjects whose reader is not their newest version (a rule kept on the versions it started with)."""
        newest: dict[str, int] = {}
        for w in self.writers.values():
            newest[w.subject] = max(newest.get(w.subject, 0), w.version)
        return sorted(s for s, r in self.readers.items() if r.version < newest.get(s, 0))


def subject_versions(client: RegistryClient, subject: str) -> list[WriterSchema]:
    """Every live version of `subject`; none when it (or a version) was deleted while we listed it."""
    out = []
    try:
        numbers = client.versions(subject)
    except RegistryClientError as exc:
        if exc.not_found:
            return []
        raise
    for n in numbers:
        try:
            got = client.version(subject, n)
        except RegistryClientError as exc:
            if exc.not_found:
                continue
            raise
        out.append(WriterSchema(int(got["id"]), subject, int(got["version"]), str(got["schema"])))
    return out


def take_snapshot(client: RegistryClient, prefix: str, bad_ids: frozenset[int] = frozenset()) -> SchemaSnapshot:
    """All versions of the subjects starting with `prefix`; the reader of each is its newest version."""
    writers: dict[int, WriterSchema] = {}
    readers: dict[str, WriterSchema] = {}
    for subject in sorted(s for s in client.subjects() if s.startswith(prefix)):
        versions = subject_versions(client, subject)
        if not versions:
            continue
        for w in versions:
            # The same schema under two subjects has one id; the first subject (sorted) wins.
            writers.setdefault(w.schema_id, w)
        readers[subject] = max(versions, key=lambda w: w.version)
    return SchemaSnapshot(writers, readers, frozenset(bad_ids - set(writers)))
