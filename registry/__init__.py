"""Headwater's Confluent-compatible schema registry, stored in the compacted `_schemas` Kafka topic."""
