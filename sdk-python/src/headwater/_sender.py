"""Delivering one batch: encode, compress, POST with retries, and turn the answer into an action on the store."""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import platform
import time
from typing import Any, Callable

from ._batcher import Batch
from ._config import ClientConfig
from ._exceptions import (
    BatchRejectedError,
    DeliveryError,
    EventRejectedError,
    EventsDroppedError,
    RetryableStatusError,
    TransportError,
)
from ._failover import HEALTH_FAILURES, PROBE_TIMEOUT_S, READY_PATH, Endpoints, Switch
from ._gate import Aborted
from ._ids import split_batch_id
from ._limit import Signal, Window
from ._metrics import Counters
from ._registry import SchemaCache
from ._retry import Outcome, RetryPolicy, classify
from ._transport import Request, Response, Transport
from ._version import SDK_NAME, __version__
from ._wire import JSON_TYPE, Rejection, compress, json_body, parse_answer, parse_error, parse_retry_after

log = logging.getLogger("headwater")
_NOTHING_TO_SEND = Response(200, {}, b'{"accepted":0,"rejected":[]}')
USER_AGENT = f"{SDK_NAME}/{__version__} ({platform.python_implementation().lower()}/{platform.python_version()})"


class Action(enum.Enum):
    """What the worker does with the batch afterwards."""

    ACK = "ack"  # delivered or permanently refused: forget it
    SPLIT = "split"  # replace it by its halves
    RELEASE = "release"  # keep it pending and try again later


@dataclasses.dataclass(frozen=True)
class DeliveryReport:
    """Passed to `on_delivery` for every batch the gateway answered with 200 or 422."""

    batch_id: str
    producer_id: str
    first_seq: int
    last_seq: int
    accepted: int
    rejected: tuple[EventRejectedError, ...]


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A request body ready to send, and the events the encoder rejected before sending."""

    body: bytes
    content_type: str
    sent_index: tuple[int, ...]  # position in the batch of each event in the body
    local_rejects: tuple[EventRejectedError, ...]


def split(batch: Batch) -> tuple[Batch, Batch]:
    """The two halves of a batch, with derived batch ids and their own seq ranges."""
    mid = len(batch.events) // 2
    halves = []
    for n, part in enumerate((batch.events[:mid], batch.events[mid:])):
        seqs = [int(json.loads(e)["seq"]) for e in (part[0], part[-1])]
        halves.append(Batch(split_batch_id(batch.batch_id, n), batch.producer_id, seqs[0], seqs[1], part))
    return halves[0], halves[1]


class Sender:
    """Sends batches to `{endpoint}/v1/batch` (the active one of `endpoints`) and reports what happened through
    counters and callbacks."""

    def __init__(self, cfg: ClientConfig, transport: Transport, schemas: SchemaCache | None, *,
                 counters: Counters, policy: RetryPolicy, window: Window,
                 report: Callable[[DeliveryError], None], endpoints: Endpoints | None = None) -> None:
        self._cfg = cfg
        self._transport = transport
        self._window = window
        self._schemas = schemas
        self._counters = counters
        self._policy = policy
        self._report = report
        self._endpoints = endpoints or Endpoints(cfg.endpoints, cfg.failover_after_failures, cfg.failover_after_s,
                                                 cfg.failback_probe_s)
        self._auth = "Bearer " + cfg.write_key
        self._first_sent: dict[str, int] = {}  # batch_id -> sent_at of its first send (kept while it is released)

    def deliver(self, batch: Batch, keep_on_failure: bool) -> tuple[Action, tuple[Batch, ...]]:
        """Send `batch` until answered; `keep_on_failure` (a spool) keeps it after the deadline.

        Returns the action for the store, and the halves for `Action.SPLIT`. Thread-safe: several senders
        call it at once.
        """
        self._counters.add("sent", len(batch.events))
        self._counters.add("batches_sent")
        sent_at = self._first_sent.setdefault(batch.batch_id, time.time_ns() // 1_000_000)
        encoded: list[Encoded] = []

        def attempt() -> Response:
            if not encoded:
                encoded.append(self._encode(batch, sent_at))
            return self._post(encoded[0])

        try:
            resp = self._policy.call(attempt)
        except Aborted:
            return Action.RELEASE, ()
        except TransportError as exc:
            if keep_on_failure:
                return Action.RELEASE, ()
            self._report(EventsDroppedError("retry_deadline", len(batch.events),
                                            f"batch {batch.batch_id} not delivered within retry_deadline_s: {exc}"))
            self._counters.settle(dropped={"retry_deadline": len(batch.events)})
            self._first_sent.pop(batch.batch_id, None)
            return Action.ACK, ()
        self._first_sent.pop(batch.batch_id, None)
        if self._cfg.debug:
            log.debug("headwater: batch %s (%d events): HTTP %d", batch.batch_id, len(batch.events), resp.status)
        return self._answered(batch, encoded[0], resp)

    def _post(self, enc: Encoded) -> Response:
        """One attempt, inside a place of the in-flight window; a retryable answer raises."""
        if not enc.sent_index:  # the encoder rejected every event: nothing to send
            return _NOTHING_TO_SEND
        headers = {"Content-Type": enc.content_type, "Content-Encoding": self._cfg.compression,
                   "Authorization": self._auth, "User-Agent": USER_AGENT}
        body = compress(enc.body, self._cfg.compression)
        self._probe()
        index, base = self._endpoints.current()
        slot = self._window.acquire()
        if slot is None:
            raise Aborted()
        signal = Signal.FAILURE  # no answer (connection error, timeout) unless one is read
        try:
            resp = self._transport.send(Request("POST", base + "/v1/batch", headers, body),
                                        self._cfg.request_timeout_s)
            outcome = classify(resp.status)
            signal = Signal.SUCCESS if outcome is Outcome.DONE else \
                Signal.FAILURE if outcome is Outcome.RETRY else Signal.NEUTRAL
        except TransportError as exc:
            self._endpoint_failed(exc, index)
            raise
        finally:
            self._window.release(slot, signal)
        if resp.status not in HEALTH_FAILURES:
            self._endpoints.answered(index)
        if outcome is Outcome.RETRY:
            code, message = parse_error(resp.body)
            retry_after = parse_retry_after(resp.headers.get("retry-after"), time.time())
            err = RetryableStatusError(resp.status, retry_after, f"{code} {message}".strip())
            if resp.status in HEALTH_FAILURES:
                self._endpoint_failed(err, index)
            raise err
        return resp

    def _endpoint_failed(self, exc: TransportError, index: int) -> None:
        """Count an endpoint failure (no answer, 502/503/504) against endpoint `index`: `exc.switched` if it moved
        the client on; `exc.short` with other endpoints (retried within retry_refused_max_s, §9)."""
        exc.switched = self._moved(self._endpoints.failed(index))
        exc.short = len(self._endpoints.urls) > 1

    def _probe(self) -> None:
        """While on a later endpoint, one sender at a time asks the earlier ones `GET /readyz` (when due) and
        the client returns to the first that answers 200 (protocol.md §9)."""
        targets = self._endpoints.probe_targets()
        if not targets:
            return
        ready: int | None = None
        timeout = min(PROBE_TIMEOUT_S, self._cfg.request_timeout_s)
        try:
            for i in targets:
                try:
                    resp = self._transport.send(Request("GET", self._endpoints.urls[i] + READY_PATH,
                                                        {"User-Agent": USER_AGENT}), timeout)
                except TransportError:
                    continue
                if resp.status == 200:
                    ready = i
                    break
        finally:
            self._moved(self._endpoints.probed(ready))

    def _moved(self, switch: Switch | None) -> bool:
        """Log and act on a move to another endpoint; True if there was one."""
        if switch is None:
            return False
        self._window.new_path()
        if switch.failback:
            log.warning("headwater: failing back to %s (ready again); was sending to %s", switch.new, switch.old)
            self._policy.gate.switched()
        else:
            log.warning("headwater: failing over from %s to %s after %d failed attempt(s) in %.1f s",
                        switch.old, switch.new, switch.failures, switch.seconds)
        return True

    def _answered(self, batch: Batch, enc: Encoded, resp: Response) -> tuple[Action, tuple[Batch, ...]]:
        outcome = classify(resp.status)
        n = len(batch.events)
        if outcome is Outcome.SPLIT and n > 1:
            return Action.SPLIT, split(batch)
        if outcome is not Outcome.DONE:  # a refusal, or a single event answered 413
            code, message = parse_error(resp.body)
            code = code or ("event_too_large" if outcome is Outcome.SPLIT else f"http_{resp.status}")
            self._report(BatchRejectedError(batch.batch_id, resp.status, code, message, n))
            self._counters.settle(dropped={code: n})
            return Action.ACK, ()
        answer = parse_answer(resp.body)
        rejected = list(enc.local_rejects)
        for r in answer.rejected:
            if 0 <= r.index < len(enc.sent_index):
                rejected.append(self._rejection(batch, enc.sent_index[r.index], r))
        for err in rejected:
            self._report(err)
        accepted = n - len(rejected)
        self._counters.settle(acknowledged=accepted, rejected=len(rejected))
        report = DeliveryReport(batch.batch_id, batch.producer_id, batch.first_seq, batch.last_seq, accepted,
                                tuple(rejected))
        callback = self._cfg.on_delivery
        if callback is not None:
            try:
                callback(report)
            except Exception:  # a callback's bug must not stop delivery
                log.exception("headwater: on_delivery callback failed")
        return Action.ACK, ()

    def _rejection(self, batch: Batch, index: int, r: Rejection) -> EventRejectedError:
        env = json.loads(batch.events[index])
        if self._schemas is not None and "schema" in r.code.lower():
            self._schemas.invalidate(str(env.get("event_type")))
        return EventRejectedError(batch.batch_id, str(env.get("event_id")), int(env.get("seq", -1)), r.code,
                                  r.message)

    def _encode(self, batch: Batch, sent_at: int) -> Encoded:
        if self._schemas is None:
            return Encoded(json_body(batch, sent_at), JSON_TYPE, tuple(range(len(batch.events))), ())
        from ._avro import AVRO_TYPE, avro_body, avro_event, avro_record  # noqa: PLC0415 - the `avro` extra

        framed: list[bytes] = []
        index: list[int] = []
        rejects: list[EventRejectedError] = []
        for i, raw in enumerate(batch.events):
            env: dict[str, Any] = json.loads(raw)
            schema = self._schemas.get(str(env["event_type"]))  # TransportError: retried
            if schema is None:
                rejects.append(EventRejectedError(batch.batch_id, env["event_id"], env["seq"], "unknown_event_type",
                                                  f"no subject for {env['event_type']} in the registry"))
                continue
            try:
                framed.append(avro_event(avro_record(env, sent_at), schema.schema_id, schema.parsed))
            except Exception as exc:  # fastavro raises many types for a record that does not match
                rejects.append(EventRejectedError(batch.batch_id, env["event_id"], env["seq"], "schema_mismatch",
                                                  f"{type(exc).__name__}: {exc}"))
                continue
            index.append(i)
        return Encoded(avro_body(batch.batch_id, sent_at, framed), AVRO_TYPE, tuple(index), tuple(rejects))

