"""The subscription server's Prometheus metrics (`GET /metrics`), one process per instance."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()
SUBSCRIBERS = Gauge("headwater_subscribe_subscribers", "open subscriptions", registry=REGISTRY)
CATCHING_UP = Gauge("headwater_subscribe_catching_up", "subscriptions reading the log behind the live tail",
                    registry=REGISTRY)
CATCHUPS = Counter("headwater_subscribe_catchups_total", "subscriptions that read the log before the live tail",
                   registry=REGISTRY)
READERS = Gauge("headwater_subscribe_readers", "topics with a running live reader", registry=REGISTRY)
REFUSED = Counter("headwater_subscribe_refused_total", "subscription requests refused, by error code", ["code"],
                  registry=REGISTRY)
CUTOFFS = Counter("headwater_subscribe_cutoffs_total", "subscribers cut off, by reason (too_slow, stalled)",
                  ["reason"], registry=REGISTRY)
RECORDS = Counter("headwater_subscribe_records_sent_total", "record messages written to subscribers",
                  registry=REGISTRY)
BYTES = Counter("headwater_subscribe_bytes_sent_total", "bytes written to subscribers", registry=REGISTRY)
HOLD = Histogram("headwater_subscribe_hold_seconds",
                 "from the live reader receiving a record from Kafka to its write to a subscriber's socket (the oldest "
                 "record of each write)", registry=REGISTRY,
                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
