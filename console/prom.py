"""Reads Prometheus text exposition into the few figures the console charts (pure functions on text and values)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

QUANTILES = (0.5, 0.95, 0.99)


@dataclass
class GatewaySample:
    """Counters and gauges of one scrape (summed over the gateways scraped)."""

    accepted: float = 0.0
    rejected_by_code: dict[str, float] = field(default_factory=dict)
    answers_by_code: dict[str, float] = field(default_factory=dict)  # /v1/batch answers by error code ("ok")
    latency_buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    inflight_events: float = 0.0
    inflight_bytes: float = 0.0
    up: int = 0


def parse(text: str, into: GatewaySample | None = None) -> GatewaySample:
    """Add one gateway's exposition to `into` (a new sample when None)."""
    s = into or GatewaySample()
    s.up += 1
    rejected: dict[str, float] = defaultdict(float, s.rejected_by_code)
    answers: dict[str, float] = defaultdict(float, s.answers_by_code)
    buckets: dict[float, float] = defaultdict(float, s.latency_buckets)
    for family in text_string_to_metric_families(text):
        for m in family.samples:
            if m.name == "headwater_gateway_events_total" and m.labels.get("outcome") == "accepted":
                s.accepted += m.value
            elif m.name == "headwater_gateway_rejections_total":
                rejected[m.labels.get("code", "?")] += m.value
            elif m.name == "headwater_gateway_requests_total" and m.labels.get("path") == "/v1/batch":
                answers[m.labels.get("code", "?")] += m.value
            elif m.name == "headwater_gateway_request_seconds_bucket":
                buckets[float(m.labels["le"])] += m.value
            elif m.name == "headwater_gateway_inflight_events":
                s.inflight_events += m.value
            elif m.name == "headwater_gateway_inflight_bytes":
                s.inflight_bytes += m.value
    s.rejected_by_code, s.answers_by_code, s.latency_buckets = dict(rejected), dict(answers), dict(buckets)
    return s


def rate(new: float, old: float, seconds: float) -> float:
    """Per-second increase of a counter; a reset (process restart) counts from zero."""
    if seconds <= 0:
        return 0.0
    return max(0.0, (new - old if new >= old else new) / seconds)


def rates_by_key(new: dict[str, float], old: dict[str, float], seconds: float) -> dict[str, float]:
    return {k: rate(v, old.get(k, 0.0), seconds) for k, v in new.items()}


def quantile(q: float, new: dict[float, float], old: dict[float, float]) -> float | None:
    """histogram_quantile over the increase between two scrapes (linear in the bucket); None: no requests."""
    bounds = sorted(new)
    counts = [max(0.0, new[b] - old.get(b, 0.0)) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    target = q * counts[-1]
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= target:
            if math.isinf(bound):
                return prev_bound
            width = count - prev_count
            return prev_bound + (bound - prev_bound) * ((target - prev_count) / width if width > 0 else 1.0)
        prev_bound, prev_count = bound, count
    return prev_bound
