"""Headwater's ingestion gateway: authenticated, validated, transactional batch ingestion into Kafka."""
