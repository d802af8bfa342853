"""Reads a request body within a time and size bound and decompresses it with a streaming, capped decoder.

aiohttp's own Content-Encoding decoding is switched off (`auto_decompress=False` on the runner): it would run
in the HTTP parser before authentication, answer 400 in plain text for what it cannot decode, and bound only
the output size. Here decompression happens after authentication, bounded by output size, ratio and frame
count, and every failure maps to the gateway's own JSON errors.

Cost is linear in the input. A decoder copies the input it was given past its frame's end into `unused_data`,
so feeding it the whole remaining body made 1 MiB of 9-byte empty frames cost 4.5 s (quadratic). Here each
frame's decoder is fed slices that start small and double (64 B up to 16 KiB), and the walk rewinds to the
frame's end by offset: every frame costs O(its size + 64 bytes). A body may also hold at most `max_frames`
zstd frames or gzip members (each costs a new decoder), and a body large enough to take milliseconds is
decompressed in a worker thread, off the event loop (zlib and zstd release the GIL while they work).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import Protocol

from aiohttp import ClientPayloadError
from aiohttp.http_exceptions import BadHttpMessage, ContentLengthError
from backports import zstd

from gateway.config import Limits
from gateway.errors import BadRequest, ClientGone, PayloadTooLarge, RequestTimeout, UnsupportedMedia

_CHUNK = 64 * 1024
_MIN_SLICE = 64              # first input slice fed to a frame's decoder; doubles while the frame goes on
_MAX_SLICE = 16 * 1024
OFF_LOOP_BYTES = 64 * 1024   # compressed bodies above this are decompressed in a worker thread
ENCODINGS = ("identity", "zstd", "gzip")


class _Stream(Protocol):
    async def read(self, n: int = -1) -> bytes: ...


class _Decoder(Protocol):
    @property
    def eof(self) -> bool: ...

    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: bytes, max_length: int = ...) -> bytes: ...


def content_encoding(header: str | None) -> str:
    """The one supported encoding named by the header (absent = identity); 415 otherwise."""
    value = (header or "identity").strip().lower()
    if value not in ENCODINGS:
        raise UnsupportedMedia(f"Content-Encoding {header!r} is not supported (zstd, gzip, identity)",
                               code="unsupported_encoding")
    return value


async def read_body(stream: _Stream, content_length: int | None, limits: Limits, timeout_s: float,
                    hold: Callable[[int], None] | None = None) -> bytes:
    """The raw (still compressed) body: at most `max_compressed_bytes`, within `timeout_s`.

    `hold(n)` is called for each chunk as it arrives (the in-flight byte budget): bytes are counted once
    received, never by what `Content-Length` declares, so headers alone reserve nothing.
    """
    cap = limits.max_compressed_bytes
    if content_length is not None and content_length > cap:
        raise PayloadTooLarge(f"body of {content_length} bytes exceeds {cap}", code="body_too_large")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                chunk = await stream.read(_CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > cap:
                    raise PayloadTooLarge(f"body exceeds {cap} bytes", code="body_too_large")
                if hold is not None:
                    hold(len(chunk))
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeout(f"body not received within {timeout_s:g}s") from None
    except (ConnectionError, ClientPayloadError, ContentLengthError) as exc:  # the peer closed mid-body
        raise ClientGone(f"client closed the connection after {size} body bytes ({type(exc).__name__})") from None
    except BadHttpMessage as exc:
        raise BadRequest(f"malformed body framing ({type(exc).__name__})", code="invalid_http") from None
    return b"".join(chunks)


async def decompress_off_loop(raw: bytes, encoding: str, limits: Limits) -> bytes:
    """`decompress`, in a worker thread when the body is large enough to hold the event loop for long."""
    if encoding == "identity" or len(raw) <= OFF_LOOP_BYTES:
        return decompress(raw, encoding, limits)
    return await asyncio.get_running_loop().run_in_executor(None, decompress, raw, encoding, limits)


def decompress(raw: bytes, encoding: str, limits: Limits) -> bytes:
    """Decode `raw` with a streaming decoder whose output never exceeds the body cap or the ratio cap."""
    if encoding == "identity":
        if len(raw) > limits.max_body_bytes:
            raise PayloadTooLarge(f"body exceeds {limits.max_body_bytes} bytes", code="body_too_large")
        return raw
    by_ratio = max(len(raw), 1) * limits.max_ratio
    cap = min(limits.max_body_bytes, by_ratio)
    out = _inflate(raw, encoding, cap, limits.max_frames)
    if len(out) > cap:
        if cap == by_ratio and by_ratio < limits.max_body_bytes:
            raise PayloadTooLarge(f"decompression ratio exceeds {limits.max_ratio}", code="ratio_too_large")
        raise PayloadTooLarge(f"decompressed body exceeds {limits.max_body_bytes} bytes", code="body_too_large")
    return out


def _new_decoder(encoding: str) -> _Decoder:
    if encoding == "zstd":
        return zstd.ZstdDecompressor()
    return zlib.decompressobj(wbits=31)  # gzip framing only


def _inflate(raw: bytes, encoding: str, cap: int, max_frames: int) -> bytes:
    """Up to cap + 1 bytes of output (one more than allowed tells the caller it is over); multi-frame aware."""
    view = memoryview(raw)
    parts: list[bytes] = []
    produced = pos = frames = size = 0
    decoder: _Decoder | None = None
    try:
        while produced <= cap and pos < len(raw):
            if decoder is None:
                frames += 1
                if frames > max_frames:
                    raise PayloadTooLarge(f"more than {max_frames} {encoding} frames in one body",
                                          code="too_many_frames")
                decoder, size = _new_decoder(encoding), _MIN_SLICE
            data = bytes(view[pos:pos + size])
            pos += len(data)
            size = min(2 * size, _MAX_SLICE)
            for chunk in _feed(decoder, encoding, data, cap + 1 - produced):
                parts.append(chunk)
                produced += len(chunk)
            if decoder.eof:  # the next frame starts where this one ended, inside `data`
                pos -= len(decoder.unused_data)
                decoder = None
    except (zstd.ZstdError, zlib.error) as exc:
        raise BadRequest(f"corrupt {encoding} body: {str(exc)[:200]}", code="invalid_compression") from None
    if produced <= cap and decoder is not None:
        raise BadRequest(f"truncated {encoding} body", code="invalid_compression")
    return b"".join(parts)


def _feed(decoder: _Decoder, encoding: str, data: bytes, room: int) -> list[bytes]:
    """Feed one slice; collect output until the decoder wants input, reaches its frame end, or `room` is used."""
    out = [decoder.decompress(data, room)]
    got = len(out[0])
    while not decoder.eof and got < room:
        if encoding == "zstd":
            if getattr(decoder, "needs_input", True):
                break
            chunk = decoder.decompress(b"", room - got)
        else:  # zlib keeps input it could not yet emit in unconsumed_tail; feed it back
            tail: bytes = getattr(decoder, "unconsumed_tail", b"")
            if not tail:
                break
            chunk = decoder.decompress(tail, room - got)
        if not chunk:
            break
        out.append(chunk)
        got += len(chunk)
    return out
