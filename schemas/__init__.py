"""Headwater's Avro event schemas: the catalog of event types and the schema-evolution CLI."""

from schemas.catalog import SCHEMAS_DIR, Catalog, CatalogError, EventType, load_catalog

__all__ = ["SCHEMAS_DIR", "Catalog", "CatalogError", "EventType", "load_catalog"]
