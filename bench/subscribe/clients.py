"""Subscriber processes for the benchmark: raw HTTP/1.1 SSE connections on uvloop, of five kinds.

- probe: decodes the chunked stream and takes every record's `seq` and arrival time (latency);
- drain: reads and counts bytes and records, nothing more (so that 1,000 subscribers cost the client little);
- follower: a drain of one node's records only (`filter={"node_id": "node-<n>"}`, about 1/1,000 of the stream):
  a dashboard following one device, so that 1,000 subscribers fit on the host beside the server;
- slow: reads 8 KiB every 100 ms and reconnects with Last-Event-ID when the server cuts it off;
- stalled: sends its request and never reads (a small receive buffer).

A connection that fails or ends is counted under its kind and reason (the HTTP status line of a refusal, the
`cutoff` code the server sent, the exception), so that a phase says what failed instead of stopping at the first.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

SEQ = re.compile(rb'"seq":(\d+)')
ID = re.compile(rb"(?:^|\n)id: ([0-9a-f]{8}-[0-9.]+)\n")
CUTOFF = re.compile(rb'event: cutoff\n(?:id: [^\n]*\n)?data: \{"code":"(\w+)"')
OPEN_TIMEOUT_S = 120.0


class StreamEnded(Exception):
    """The server ended a stream the client did not end."""


def ended(kind: str, tail: bytes) -> StreamEnded:
    cut = CUTOFF.search(tail)
    why = f"cut off by the server ({cut.group(1).decode()})" if cut else "closed by the server"
    return StreamEnded(f"{kind}: {why}")


@dataclass
class Tally:
    records: int = 0
    bytes: int = 0
    arrivals: list[tuple[int, float]] = field(default_factory=list)  # probes: (seq, epoch s)
    reconnects: int = 0
    cutoffs: int = 0


async def _open(host: str, port: int, path: str, key: str, *, last_id: str | None = None,
                rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 20)
    extra = f"Last-Event-ID: {last_id}\r\n" if last_id else ""
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n{extra}\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
    return reader, writer


async def _chunks(reader: asyncio.StreamReader) -> Any:
    """The chunked body's chunks (each one of the server's writes: whole SSE messages)."""
    while True:
        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
        if size == 0:
            return
        data = await reader.readexactly(size + 2)
        yield data[:-2]


@dataclass
class Client:
    host: str
    port: int
    path: str
    key: str
    measuring: bool = False
    opened: int = 0
    settled: int = 0  # connections opened or failed before opening
    failures: Counter[str] = field(default_factory=Counter)
    tallies: dict[str, Tally] = field(default_factory=dict)

    def tally(self, kind: str) -> Tally:
        return self.tallies.setdefault(kind, Tally())

    async def one(self, kind: str) -> None:
        """Run one connection of `kind`; count how it failed or ended."""
        state = {"open": False}

        def opened() -> None:
            state["open"] = True
            self.opened += 1
            self.settled += 1

        try:
            await getattr(self, kind)(opened)
            reason = f"{kind}: ended"
        except asyncio.CancelledError:
            raise
        except StreamEnded as exc:
            reason = str(exc)
        except Exception as exc:
            reason = f"{kind}: {type(exc).__name__}: {exc}"[:200]
        self.failures[reason] += 1
        if not state["open"]:
            self.settled += 1

    async def probe(self, opened: Callable[[], None]) -> None:
        reader, _ = await _open(self.host, self.port, self.path, self.key)
        opened()
        t, last = self.tally("probe"), b""
        async for chunk in _chunks(reader):
            now = time.time()
            last = chunk
            if self.measuring:
                seqs = SEQ.findall(chunk)
                t.records += len(seqs)
                t.arrivals.extend((int(s), now) for s in seqs)
        raise ended("probe", last[-512:])

    async def drain(self, opened: Callable[[], None], kind: str = "drain", path: str | None = None) -> None:
        reader, _ = await _open(self.host, self.port, path or self.path, self.key)
        opened()
        t, last = self.tally(kind), b""
        while data := await reader.read(1 << 16):
            last = data
            if self.measuring:
                t.bytes += len(data)
                t.records += data.count(b"data: ")
        raise ended(kind, last[-512:])

    async def follower(self, opened: Callable[[], None]) -> None:
        node = json.dumps({"node_id": f"node-{random.randrange(1000)}"})  # the producer's nodes: node-0..node-999
        await self.drain(opened, "follower", f"{self.path}?filter={urllib.parse.quote(node)}")

    async def slow(self, opened: Callable[[], None]) -> None:
        t, last_id = self.tally("slow"), None
        while True:
            reader, writer = await _open(self.host, self.port, self.path, self.key, last_id=last_id)
            if last_id is None:
                opened()
            try:
                async for chunk in _chunks(reader):
                    ids = ID.findall(chunk)
                    if ids:
                        last_id = ids[-1].decode()
                    t.cutoffs += chunk.count(b"event: cutoff")
                    await asyncio.sleep(0.1 * max(1, len(chunk) // 8192))
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            writer.close()
            t.reconnects += 1

    async def stalled(self, opened: Callable[[], None]) -> None:
        await _open(self.host, self.port, self.path, self.key, rcvbuf=4096)
        opened()
        self.tally("stalled")
        await asyncio.Event().wait()


async def _main(client: Client, counts: dict[str, int], conn: Connection) -> None:
    tasks = [asyncio.create_task(client.one(kind)) for kind, n in counts.items() for _ in range(n)]
    total, loop = sum(counts.values()), asyncio.get_running_loop()
    began = loop.time()
    while client.settled < total and loop.time() - began < OPEN_TIMEOUT_S:
        await asyncio.sleep(0.05)
    conn.send({"opened": client.opened, "wanted": total, "open_s": round(loop.time() - began, 1),
               "failures": dict(client.failures)})
    assert await loop.run_in_executor(None, conn.recv) == "go"
    client.failures.clear()
    client.measuring = True
    assert await loop.run_in_executor(None, conn.recv) == "stop"
    client.measuring = False
    conn.send({"tallies": {k: vars(t) for k, t in client.tallies.items()}, "failures": dict(client.failures)})
    for task in tasks:
        task.cancel()


def run(url: str, key: str, stream: str, counts: dict[str, int], conn: Connection) -> None:
    """A client process: open the connections of `counts`, say ready, measure between go and stop."""
    import uvloop  # noqa: PLC0415

    host, port = url.split("//", 1)[1].split(":")
    client = Client(host, int(port), f"/v1/streams/{stream}", key)
    uvloop.run(_main(client, counts, conn))
