"""One subscription's life on its connection: the start position, catch-up from the log if the ring does not hold
it, then the ring's live tail until the client leaves, falls too far behind, or the instance shuts down.

Flow control: every write waits for the socket (aiohttp drains the transport above 64 KiB), so a subscriber's
memory is its socket buffers plus one chunk. A subscriber whose position is more than `buffer_bytes` behind the
ring's tail, or whose position the ring dropped, is cut off: `event: cutoff` with its position, then the
connection closes (aborted after `cutoff_grace_s` if the client reads nothing). It resumes from the log when it
reconnects with that position. The hub's ticker checks subscribers blocked on a full socket; the others check
themselves each time they wake.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from aiohttp import web

from subscribe import metrics as m
from subscribe import sse
from subscribe.catchup import LogReader
from subscribe.config import SubscribeConfig
from subscribe.filters import Filter
from subscribe.hub import Hub
from subscribe.position import Cursor, encode
from subscribe.ring import Ring, View
from subscribe.streams import Stream

log = logging.getLogger("subscribe.subscriber")
MAX_CHUNK = 256 * 1024
FETCH_WAIT_S = 0.5
CUT_MESSAGES = {"too_slow": ("subscriber_too_slow", "fell more than the buffer behind the live stream"),
                "stalled": ("subscriber_stalled", "accepted nothing for too long while reading the log")}


class Cut(Exception):
    """The subscriber is cut off (reason in `Subscriber.cut_reason`)."""


@dataclass
class Outcome:
    """What the request log line says about a finished subscription."""

    records: int = 0
    bytes: int = 0
    end: str = "client_closed"
    caught_up: bool = False


@dataclass(eq=False)  # hashed by identity: the hub keeps a set of them
class Subscriber:
    hub: Hub
    request: web.Request
    resp: web.StreamResponse
    stream: Stream
    filter: Filter | None
    ring: Ring | None = None
    view: View | None = None
    cut_reason: str | None = None
    sent_id: bytes = b""
    last_write: float = field(default_factory=time.monotonic)
    outcome: Outcome = field(default_factory=Outcome)
    _timer: asyncio.Timeout | None = None
    _wake: asyncio.Future[None] | None = None
    chunked: bool = True  # HTTP/1.1 chunked encoding (set when following: not for an HTTP/1.0 client)

    @property
    def cfg(self) -> SubscribeConfig:
        return self.hub.cfg

    async def run(self, start: Cursor, ring: Ring, gaps: list[dict[str, int]]) -> Outcome:
        tag = ring.tag
        try:
            await self._write(sse.preamble(self.cfg.retry_ms, encode(tag, start)))
            self.sent_id = encode(tag, start)
            if gaps:
                await self._write(sse.named("gap", None, {"code": "retention", "partitions": gaps,
                                                          "message": "records before these offsets were deleted "
                                                                     "by the topic's retention"}))
            cursor: Cursor | None = start
            if not ring.holds(start):
                cursor = await self._catch_up(start, ring)
            if cursor is not None:
                await self._follow(ring, cursor)
        except Cut:
            await self._cutoff()
        except (ConnectionError, asyncio.CancelledError):
            self.outcome.end = "client_closed"
        return self.outcome

    # -- writing --

    def _gone(self) -> bool:
        transport = self.request.transport
        return transport is None or transport.is_closing()

    async def _write(self, data: bytes, stall_s: float | None = None) -> None:
        """Write and wait for the socket; raises Cut when the ticker (or the stall timeout) cut us off."""
        self._timer = asyncio.timeout(stall_s)
        try:
            async with self._timer:
                await self.resp.write(data)
        except TimeoutError:
            if self.cut_reason is None:
                self.cut_reason = "stalled"
            raise Cut from None
        finally:
            self._timer = None
        self.last_write = time.monotonic()
        self.outcome.bytes += len(data)
        m.BYTES.inc(len(data))

    def _sent(self, last_id: bytes) -> bytes:
        """The id the client holds after a chunk: the chunk's end, unless a type or filter skipped records after
        its last message (then unknown here: b"", so that the next heartbeat sends the position)."""
        return b"" if self.stream.event_type is not None or self.filter is not None else last_id

    async def _heartbeat(self, last_id: bytes) -> None:
        if time.monotonic() - self.last_write < self.cfg.heartbeat_s:
            return
        if last_id != self.sent_id:
            await self._write(sse.position(last_id))
            self.sent_id = last_id
        else:
            await self._write(sse.HEARTBEAT)

    def check_lag(self) -> None:
        """Called by the hub's ticker: cut off a subscriber blocked on its socket while too far behind."""
        if self._timer is None or self.view is None or self.ring is None or self.cut_reason is not None:
            return
        lag = self.ring.lag(self.view.seq)
        if lag is None or lag > self.cfg.buffer_bytes:
            self.cut_reason = "too_slow"
            self._timer.reschedule(asyncio.get_running_loop().time())

    async def _cutoff(self) -> None:
        reason = self.cut_reason or "too_slow"
        code, why = CUT_MESSAGES[reason]
        position = self.view.last_id if self.view is not None else self.sent_id
        m.CUTOFFS.labels(reason).inc()
        self.outcome.end = code
        frame = sse.named("cutoff", position, {"code": code, "message": f"this subscriber {why}; reconnect with "
                                                                       "Last-Event-ID to resume from the log",
                                               "position": position.decode()})
        try:
            async with asyncio.timeout(self.cfg.cutoff_grace_s):
                await self.resp.write(frame)
                await self.resp.write_eof()
        except (TimeoutError, ConnectionError):
            transport = self.request.transport
            if transport is not None:
                transport.abort()

    # -- catch-up --

    async def _catch_up(self, start: Cursor, ring: Ring) -> Cursor | None:
        """Read the log from `start` until the ring holds our position; the position, or None if we stop."""
        hub, loop = self.hub, asyncio.get_running_loop()
        m.CATCHING_UP.inc()
        m.CATCHUPS.inc()
        try:
            while True:  # wait for a catch-up slot, with heartbeats
                try:
                    async with asyncio.timeout(self.cfg.heartbeat_s / 3):
                        await hub.catchups.acquire()
                    break
                except TimeoutError:
                    if hub.closing or self._gone():
                        return None
                    await self._heartbeat(self.sent_id)
            try:
                reader = await loop.run_in_executor(hub.catchup_pool, self._open_log, start, ring)
                try:
                    return await self._read_log(reader, ring)
                finally:
                    await loop.run_in_executor(hub.catchup_pool, reader.close)
            finally:
                hub.catchups.release()
        finally:
            m.CATCHING_UP.dec()

    def _open_log(self, start: Cursor, ring: Ring) -> LogReader:
        return LogReader(ring.topic, ring.tag, start, self.hub.consumer_conf(), decoder=self.hub.decoder(self.stream),
                         event_type=self.stream.event_type, filt=self.filter)

    async def _read_log(self, reader: LogReader, ring: Ring) -> Cursor | None:
        loop = asyncio.get_running_loop()
        cursor = tuple(reader.cursor)
        while not ring.holds(cursor):
            if self.hub.closing or self._gone():
                return None
            batch = await loop.run_in_executor(self.hub.catchup_pool, reader.fetch, FETCH_WAIT_S)
            cursor = batch.cursor
            if batch.data:
                await self._write(batch.data, stall_s=self.cfg.stall_s)
                self.sent_id = self._sent(batch.last_id)
                self.outcome.records += batch.records
                m.RECORDS.inc(batch.records)
            else:
                await self._heartbeat(batch.last_id)
        self.outcome.caught_up = True
        return cursor

    # -- the live tail --

    async def _park(self, ring: Ring) -> None:
        """Wait at the tail while the ring writes new messages to our socket itself (`push`), until it cannot."""
        self._wake = asyncio.get_running_loop().create_future()
        ring.parked[self] = None
        try:
            await self._wake
        finally:
            ring.parked.pop(self, None)
            self._wake = None

    def unpark(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def push(self) -> bool:
        """Called by the ring after it appended: write the new messages straight to the socket when it holds
        nothing unsent, in one write (the chunk's bytes, HTTP framing included, are shared by every subscriber
        that sends the same chunk). False when the task must take over: the socket is backed up (the task waits
        for it and is cut off if it falls too far behind), the batch is over a chunk, or the client left."""
        ring, view, transport = self.ring, self.view, self.request.transport
        if (ring is None or view is None or transport is None or transport.is_closing()
                or transport.get_write_buffer_size() or self.hub.closing):
            return False
        lag = ring.lag(view.seq)
        if lag is None or lag > MAX_CHUNK:
            return False
        chunk = ring.read(view, MAX_CHUNK)
        if chunk is None or not chunk.records:
            return True
        data = chunk.wire if self.chunked else chunk.data
        transport.write(data)
        self.last_write = time.monotonic()
        self.sent_id = self._sent(chunk.last_id)
        self.outcome.records += chunk.records
        self.outcome.bytes += len(data)
        m.RECORDS.inc(chunk.records)
        m.BYTES.inc(len(data))
        return True

    async def _follow(self, ring: Ring, cursor: Cursor) -> None:
        self.ring, self.view = ring, ring.join(cursor, self.stream.event_type, self.filter)
        self.chunked = self.resp.headers.get("Transfer-Encoding", "").lower() == "chunked"
        view = self.view
        self.hub.subscribers.add(self)
        try:
            while not self.hub.closing:
                if self._gone():
                    return
                if self.hub.rings.get(ring.topic) is not ring:  # its reader stopped: end; the client resumes
                    self.outcome.end = "reader_stopped"
                    return
                lag = ring.lag(view.seq)
                if lag is None or lag > self.cfg.buffer_bytes:
                    self.cut_reason = "too_slow"
                    raise Cut
                received = ring.received_at(view.seq)
                chunk = ring.read(view, MAX_CHUNK)
                if chunk is None:
                    await self._heartbeat(view.last_id)
                    if view.own is None and not self.hub.closing:
                        await self._park(ring)
                    else:
                        await ring.changed.wait()
                    continue
                if chunk.records:
                    await self._write(chunk.data)
                    if received is not None:
                        m.HOLD.observe(time.monotonic() - received)
                    self.sent_id = self._sent(chunk.last_id)
                    self.outcome.records += chunk.records
                    m.RECORDS.inc(chunk.records)
                    if view.seq < ring.next_seq:
                        await asyncio.sleep(0)  # a subscriber with a long way to go lets the others write too
            self.outcome.end = "shutdown"
        finally:
            self.hub.subscribers.discard(self)
