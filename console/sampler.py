"""Turns successive raw samples (gateway metrics, Kafka figures, pipeline files) into the console's time series
and the snapshot the page draws; pure apart from the clock it is given."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from console.kafka_view import KafkaFigures, newest_windows
from console.pipeline_files import LossAudit
from console.prom import QUANTILES, GatewaySample, quantile, rate, rates_by_key

MAX_POINTS = 300  # 10 minutes at the default 2 s
OVERLOAD_CODES = ("overloaded", "rate_limited")


@dataclass
class Sampler:
    points: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))
    last_gateway: GatewaySample | None = None
    last_gateway_t: float = 0.0
    last_deadletters: int | None = None
    last_kafka_t: float = 0.0
    samples: int = 0

    def add(self, now: float, gateway: GatewaySample | None, kafka: KafkaFigures, lag: int | None) -> dict[str, Any]:
        """One point of every series at `now` (epoch seconds); counters become per-second rates."""
        point: dict[str, Any] = {"t": round(now * 1000), "lag": lag}
        if gateway is not None and self.last_gateway is not None:
            old, dt = self.last_gateway, now - self.last_gateway_t
            point["accepted"] = rate(gateway.accepted, old.accepted, dt)
            point["rejected"] = rates_by_key(gateway.rejected_by_code, old.rejected_by_code, dt)
            answers = rates_by_key(gateway.answers_by_code, old.answers_by_code, dt)
            point["overload"] = {c: answers.get(c, 0.0) for c in OVERLOAD_CODES}
            point["unavailable"] = sum(v for c, v in answers.items() if c.endswith("_unavailable"))
            point["latency_ms"] = {f"p{round(q * 100)}": _ms(quantile(q, gateway.latency_buckets, old.latency_buckets))
                                   for q in QUANTILES}
        if gateway is not None:
            point["inflight_events"] = gateway.inflight_events
            point["gateways_up"] = gateway.up
            self.last_gateway, self.last_gateway_t = gateway, now
        if self.last_deadletters is not None:
            point["deadletters"] = rate(kafka.deadletters_total, self.last_deadletters, now - self.last_kafka_t)
        self.last_deadletters, self.last_kafka_t = kafka.deadletters_total, now
        self.points.append(point)
        self.samples += 1
        return point

    def snapshot(self, kafka: KafkaFigures, audit: LossAudit, health: dict[str, Any]) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "series": list(self.points),
            "windows": {g: newest_windows(kafka.aggregates, g) for g in ("10s", "1m")},
            "deadletters": {"total": kafka.deadletters_total, "by_reason": dict(kafka.deadletters_by_reason)},
            "loss_audit": {"still_missing": audit.still_missing, "producers": audit.producers, "rows": audit.rows,
                           "error": audit.error},
            "health": health,
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)
