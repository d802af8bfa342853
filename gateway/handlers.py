"""HTTP handlers: `POST /v1/batch` (auth -> read -> decompress -> decode -> validate -> commit) and operations."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import HttpVersion11, web

from gateway import metrics as m
from gateway.avro_batch import decode_avro_batch
from gateway.batch_cache import SharedCommittedBatches
from gateway.body import content_encoding, decompress_off_loop, read_body
from gateway.commit import GroupCommitter
from gateway.config import GatewayConfig
from gateway.connections import client_ip
from gateway.errors import (
    Conflict,
    PayloadTooLarge,
    RegistryUnavailable,
    ShuttingDown,
    UnsupportedMedia,
    error_body,
)
from gateway.ingest import Plan, avro_misses, json_misses, plan_avro, plan_json
from gateway.json_batch import decode_json_batch, events_digest
from gateway.limits import CommittedBatches, InFlight, Reservation, SourceRates
from gateway.records import RequestMeta
from gateway.schema_cache import SchemaCache

log = logging.getLogger("gateway.http")
JSON_TYPE = "application/json"
AVRO_TYPE = "application/vnd.headwater.batch+avro"

READY_METADATA_TIMEOUT_S = 0.5  # /readyz's metadata request


@dataclass
class Gateway:
    """The state one worker process shares between requests."""

    cfg: GatewayConfig
    cache: SchemaCache
    committer: GroupCommitter
    inflight: InFlight
    committed: CommittedBatches | SharedCommittedBatches
    rates: SourceRates
    draining: bool = False
    # (source, batch_id) of batches being processed, so that a concurrent retry waits for the first attempt.
    running: dict[tuple[str, str], asyncio.Future[None]] = field(default_factory=dict)


GATEWAY = web.AppKey("gateway", Gateway)
SOURCE = web.RequestKey("source", str)
BATCH_ID = web.RequestKey("batch_id", str)


def _media(content_type: str) -> str:
    if content_type == JSON_TYPE:
        return "json"
    if content_type == AVRO_TYPE:
        return "avro"
    raise UnsupportedMedia(f"Content-Type {content_type!r} is not {JSON_TYPE} or {AVRO_TYPE}")


async def expect_after_auth(request: web.Request) -> web.StreamResponse | None:
    """`Expect` is answered by `post_batch` once the request is authenticated (aiohttp's default answers
    `100 Continue` to anyone, inviting an unauthenticated client to send its body)."""
    if request.headers.get("Expect", "").strip().lower() != "100-continue":
        return web.json_response(error_body("expectation_failed", "only Expect: 100-continue is supported"),
                                 status=417, headers={"Connection": "close"})
    return None


async def post_batch(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    if gw.draining:
        raise ShuttingDown("shutting down", retry_after=gw.cfg.retry_after_s)
    source = gw.cfg.keys.authenticate(request.headers.get("Authorization"))
    request[SOURCE] = source
    kind = _media(request.content_type)
    encoding = content_encoding(request.headers.get("Content-Encoding"))
    limits = gw.cfg.limits
    if request.version == HttpVersion11 and request.headers.get("Expect", "").strip().lower() == "100-continue":
        if request.content_length is not None and request.content_length > limits.max_compressed_bytes:
            raise PayloadTooLarge(f"body of {request.content_length} bytes exceeds {limits.max_compressed_bytes}",
                                  code="body_too_large")
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the answer itself has not started
    hold = Reservation(gw.inflight)  # bytes count once they arrive, decompressed output once more
    try:
        t0 = time.perf_counter()
        raw = await read_body(request.content, request.content_length, limits, gw.cfg.body_timeout_s, hold.add)
        body = await decompress_off_loop(raw, encoding, limits)
        if body is not raw:
            hold.add(len(body))
        m.BYTES_IN.labels("wire").inc(len(raw))
        m.BYTES_IN.labels("decompressed").inc(len(body))
        m.BODY_BYTES.observe(len(body))
        m.STAGE_SECONDS.labels("read").observe(time.perf_counter() - t0)
        return await _ingest(request, gw, source, kind, body)
    finally:
        hold.release()


async def _ingest(request: web.Request, gw: Gateway, source: str, kind: str, body: bytes) -> web.Response:
    t0 = time.perf_counter()
    if kind == "json":
        batch, events = decode_json_batch(body, gw.cfg.limits)
        batch_id, count = batch.batch_id, len(events)
        digest = events_digest([ev.event_id for ev in events])
    else:
        avro = decode_avro_batch(body, gw.cfg.limits)
        batch_id, count = avro.batch_id, len(avro.events)
        digest = events_digest([env.event_id if env else f"#{i}" for i, env in enumerate(avro.envelopes)])
    request[BATCH_ID] = batch_id
    running = gw.running.get((source, batch_id))
    if running is not None:  # a retry while the first attempt is still in flight: wait for its outcome
        await asyncio.shield(running)
    cached = gw.committed.get(source, batch_id)
    if cached is not None:
        if cached[2] != digest:
            raise Conflict(f"batch_id {batch_id} was already answered for other events; a retry must resend the "
                           "same events, a new batch needs a new batch_id")
        m.DEDUP_HITS.inc()
        return web.json_response(cached[1], status=cached[0], headers={"X-Headwater-Replayed": "true"})
    m.BATCH_EVENTS.observe(count)
    gw.rates.admit(source, count)
    gw.inflight.admit_events(count)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    gw.running[(source, batch_id)] = done
    try:
        meta = RequestMeta.make(batch_id, int(time.time() * 1000), source,
                                client_ip(request, gw.cfg.trusted_proxies), request.headers.get("User-Agent", ""))
        if kind == "json":
            misses = json_misses(events, gw.cache)
            gw.cache.charge(source, len(misses))
            await _fetch([gw.cache.fetch_version(t, v) for t, v in misses])
            plan = plan_json(batch, events, gw.cache, meta, gw.cfg.deadletter_topic)
        else:
            ids = avro_misses(avro.events, gw.cache)
            gw.cache.charge(source, len(ids))
            await _fetch([gw.cache.fetch_id(i) for i in ids])
            plan = plan_avro(avro, gw.cache, meta, gw.cfg.deadletter_topic)
        t1 = time.perf_counter()
        m.STAGE_SECONDS.labels("validate").observe(t1 - t0)
        await gw.committer.commit(plan.records)
        m.STAGE_SECONDS.labels("commit").observe(time.perf_counter() - t1)
        response = _answer(gw, source, batch_id, kind, plan, digest=digest)
        await gw.committed.written()  # every worker can replay it before the client can retry
        return response
    finally:
        gw.inflight.release_events(count)
        if gw.running.get((source, batch_id)) is done:
            del gw.running[(source, batch_id)]
        done.set_result(None)


async def _fetch(loads: list[Any]) -> None:
    """Load the schemas this batch needs and the cache misses, concurrently; any failure is a 503."""
    if not loads:
        return
    try:
        await asyncio.gather(*loads)
    except RegistryUnavailable:
        raise
    except Exception as exc:
        raise RegistryUnavailable(f"schema lookup failed: {exc!r}") from None


def _answer(gw: Gateway, source: str, batch_id: str, kind: str, plan: Plan, *, digest: bytes) -> web.Response:
    body = {
        "batch_id": batch_id,
        "accepted": plan.accepted,
        "rejected": [{"index": r.index, "code": r.code, "message": r.message} for r in plan.rejected],
    }
    status = 200 if plan.accepted else 422
    gw.committed.put(source, batch_id, status, body, digest)
    m.EVENTS.labels("accepted", kind).inc(plan.accepted)
    if plan.rejected:
        m.EVENTS.labels("rejected", kind).inc(len(plan.rejected))
        for r in plan.rejected:
            m.REJECTIONS.labels(r.code).inc()
    return web.json_response(body, status=status)


async def livez(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"})


async def readyz(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    # Half of HAProxy's 1 s check: a slow metadata answer (partitions moving) is then judged by the grace in
    # reachable(), not by the balancer timing the check out and cutting this gateway's requests in flight.
    kafka = await asyncio.get_running_loop().run_in_executor(None, gw.committer.reachable, READY_METADATA_TIMEOUT_S)
    # Ready = can accept the traffic it will get: cached schemas keep serving through a registry outage, so the
    # registry's reachability is reported, not required.
    checks = {"kafka": kafka, "schemas": gw.cache.loaded, "accepting": not gw.draining}
    ok = all(checks.values())
    return web.json_response({"status": "ready" if ok else "not_ready", "checks": checks,
                              "registry_reachable": gw.cache.healthy}, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY]
    m.PRODUCER_QUEUE.set(gw.committer.queued())
    data, content_type = m.render()
    return web.Response(body=data, headers={"Content-Type": content_type})
