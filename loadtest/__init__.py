"""Load tests of a Headwater deployment: locust nodes, reconciliation against Kafka, and a capacity model."""
