"""PySpark Structured Streaming pipeline: decode, enrich, deduplicate and aggregate Headwater events."""
