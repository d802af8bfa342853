"""Registers the catalog's event types (compatibility level, then every version in order) in a registry."""

from __future__ import annotations

from dataclasses import dataclass

from common.registry_client import RegistryClient
from schemas.catalog import Catalog


@dataclass(frozen=True)
class Registration:
    """One catalog file registered: its catalog version and the registry's id and version for it."""

    event_type: str
    subject: str
    file_version: int
    schema_id: int
    registry_version: int


def register_catalog(client: RegistryClient, catalog: Catalog) -> list[Registration]:
    """Set each subject's compatibility, then register its versions in order. Idempotent."""
    done: list[Registration] = []
    for et in catalog.event_types.values():
        client.set_compatibility(et.subject, et.compatibility)
        for n in range(1, et.latest_version + 1):
            text = et.schema_text(n)
            schema_id = client.register(et.subject, text)
            version = int(client.lookup(et.subject, text)["version"])
            done.append(Registration(et.name, et.subject, n, schema_id, version))
    return done
