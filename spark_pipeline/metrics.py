"""Serves the pipeline's Prometheus metrics: per built-in query and per rule, rows/s, latency, lag, state and failures.

`PipelineMetrics.sample()` reads what the running queries report (each query's last progress: input rows/s, the
Kafka offsets its source ended at, its state store rows, and the latency it observed, see `observe_latency`) and
the rule manager's slots (state, tier, failures in a row); `serve()` samples every `interval_s` in a thread and
answers `/metrics` on HEADWATER_PIPELINE_METRICS_PORT (0: no endpoint). ops/alerts.yml alerts on these series.

A real-time query reports progress once per real-time batch (HEADWATER_REALTIME_BATCH): its series move at that
pace. Rules packed into one query report that query's rows/s, lag, state and latency, with their own output
matched rows per second (`headwater_rule_matched_rows_per_second`, counted in the query).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Gauge, start_http_server
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_pipeline.rules.progress import HighWatermarks, as_dict, lag

log = logging.getLogger("spark_pipeline.metrics")
LATENCY_METRICS = "latency"  # the name of the observed metrics `observe_latency` adds
STATES = ("starting", "running", "failed", "stopped")


def now_ms() -> Column:
    """The wall clock of the executor evaluating the row, in ms (current_timestamp() is fixed per batch)."""
    return F.expr("cast(reflect('java.lang.System', 'currentTimeMillis') as bigint)")


def observe_latency(df: DataFrame, created_ms: Column, counts: Mapping[str, Column] | None = None) -> DataFrame:
    """`df` observed per batch: latency from `created_ms` to this point (p50, p99, max, in ms), rows, and one
    count per `counts` entry (a condition)."""
    # The clock is read in a projection: observe() evaluates its expressions without initialising
    # non-deterministic ones such as reflect() (Spark fails the task: "should be initialized before eval").
    column = "_headwater_latency_ms"
    timed = df.withColumn(column, now_ms() - created_ms)
    latency = F.col(column)
    extra = [F.count_if(cond).alias(f"count:{name}") for name, cond in (counts or {}).items()]
    observed = timed.observe(LATENCY_METRICS, F.percentile_approx(latency, [0.5, 0.99], 200).alias("latency_ms"),
                             F.max(latency).alias("latency_max_ms"), F.count(F.lit(1)).alias("rows"), *extra)
    return observed.drop(column)


@dataclass(frozen=True)
class QueryFigures:
    """What one progress report says, for the metrics."""

    rows_per_s: float
    lag: int | None
    state_rows: int
    latency_ms: tuple[float, float, float] | None  # p50, p99, max
    matched_per_s: dict[str, float]  # per counted condition (a rule), rows per second of the batch
    batch_ms: float


def figures(progress: Any, watermarks: HighWatermarks) -> QueryFigures | None:
    """The figures of a progress report (None: no report yet)."""
    p = as_dict(progress)
    if not p:
        return None
    rate = p.get("processedRowsPerSecond")
    observed = (p.get("observedMetrics") or {}).get(LATENCY_METRICS) or {}
    latency = None
    percentiles = observed.get("latency_ms")
    if isinstance(percentiles, list) and len(percentiles) == 2 and observed.get("rows"):
        latency = (float(percentiles[0]), float(percentiles[1]), float(observed.get("latency_max_ms") or 0))
    duration = float((p.get("durationMs") or {}).get("triggerExecution") or 0)
    rates = {k.split(":", 1)[1]: int(v or 0) * 1000 / duration for k, v in observed.items()
             if k.startswith("count:") and duration > 0}
    return QueryFigures(float(rate) if isinstance(rate, (int, float)) else 0.0, lag(p, watermarks),
                        sum(int(op.get("numRowsTotal") or 0) for op in p.get("stateOperators") or []), latency,
                        rates, duration)


@dataclass(frozen=True)
class RuleFigures:
    """One rule as the manager runs it: state, tier, failures in a row, and its query's figures."""

    name: str
    tier: str
    state: str
    failures: int
    query: QueryFigures | None
    matched_per_s: float | None


class PipelineMetrics:
    """The gauges, labelled by built-in query or by rule and tier."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = self.registry = registry or CollectorRegistry()
        q, rl = ["query"], ["rule", "tier"]
        self.q_rows = Gauge("headwater_query_rows_per_second", "input rows per second of the last batch", q, registry=r)
        self.q_lag = Gauge("headwater_query_lag_records", "Kafka records behind its source topics", q, registry=r)
        self.q_state = Gauge("headwater_query_state_rows", "rows in the query's state stores", q, registry=r)
        self.q_latency = Gauge("headwater_query_latency_seconds", "created_at to this query's output, last batch",
                               [*q, "quantile"], registry=r)
        self.q_active = Gauge("headwater_query_active", "1 while the query runs", q, registry=r)
        self.q_restarts = Gauge("headwater_query_restarts", "times the query was restarted (schema changes, failures)",
                                q, registry=r)
        self.r_state = Gauge("headwater_rule_state", "1 for the rule's current state", [*rl, "state"], registry=r)
        self.r_rows = Gauge("headwater_rule_rows_per_second", "input rows per second of the rule's query", rl,
                            registry=r)
        self.r_matched = Gauge("headwater_rule_matched_rows_per_second",
                               "rows of the shared stream the rule matched (a filter's output records), last batch",
                               rl, registry=r)
        self.r_lag = Gauge("headwater_rule_lag_records", "Kafka records behind, of the rule's query", rl, registry=r)
        self.r_state_rows = Gauge("headwater_rule_state_rows", "state rows of the rule's query", rl, registry=r)
        self.r_latency = Gauge("headwater_rule_latency_seconds", "created_at to the rule's query output, last batch",
                               [*rl, "quantile"], registry=r)
        self.r_failures = Gauge("headwater_rule_failures", "failures in a row (0 once a batch goes through)", rl,
                                registry=r)
        self._rules: set[tuple[str, str]] = set()

    def set_query(self, name: str, active: bool, f: QueryFigures | None, restarts: int = 0) -> None:
        self.q_active.labels(name).set(1 if active else 0)
        self.q_restarts.labels(name).set(restarts)
        if f is None:
            return
        self.q_rows.labels(name).set(f.rows_per_s)
        if f.lag is not None:
            self.q_lag.labels(name).set(f.lag)
        self.q_state.labels(name).set(f.state_rows)
        if f.latency_ms is not None:
            for quantile, ms in zip(("0.5", "0.99", "1"), f.latency_ms, strict=True):
                self.q_latency.labels(name, quantile).set(ms / 1000)

    def set_rules(self, rules: Iterable[RuleFigures]) -> None:
        seen: set[tuple[str, str]] = set()
        for rule in rules:
            key = (rule.name, rule.tier)
            seen.add(key)
            for state in STATES:
                self.r_state.labels(*key, state).set(1 if state == rule.state else 0)
            self.r_failures.labels(*key).set(rule.failures)
            if rule.matched_per_s is not None:
                self.r_matched.labels(*key).set(rule.matched_per_s)
            f = rule.query
            if f is None:
                continue
            self.r_rows.labels(*key).set(f.rows_per_s)
            if f.lag is not None:
                self.r_lag.labels(*key).set(f.lag)
            self.r_state_rows.labels(*key).set(f.state_rows)
            if f.latency_ms is not None:
                for quantile, ms in zip(("0.5", "0.99", "1"), f.latency_ms, strict=True):
                    self.r_latency.labels(*key, quantile).set(ms / 1000)
        for gone in self._rules - seen:  # deleted rules leave no stale series
            for gauge in (self.r_rows, self.r_matched, self.r_lag, self.r_state_rows, self.r_failures):
                _remove(gauge, *gone)
            for state in STATES:
                _remove(self.r_state, *gone, state)
            for quantile in ("0.5", "0.99", "1"):
                _remove(self.r_latency, *gone, quantile)
        self._rules = seen


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)


class Sampler:
    """Samples `collect` (built-in queries and rules) into `metrics` every `interval_s` in a daemon thread."""

    def __init__(self, metrics: PipelineMetrics, collect: Callable[[PipelineMetrics], None],
                 interval_s: float = 5.0) -> None:
        self.metrics, self.collect, self.interval_s = metrics, collect, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="headwater-metrics", daemon=True)
        self._server: WSGIServer | None = None

    def start(self, port: int | None = None) -> Sampler:
        if port:
            self._server, _ = start_http_server(port, registry=self.metrics.registry)
            log.info("pipeline metrics on :%d/metrics", port)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.collect(self.metrics)
            except Exception as exc:  # metrics never stop the pipeline
                log.warning("metrics sample failed: %s", exc)

    def stop(self) -> None:
        """Stop sampling and release the port (a job run again in the same process serves its own figures)."""
        self._stop.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
