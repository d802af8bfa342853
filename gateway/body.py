"""Reads a request body within a time and size bound and decompresses it with a streaming, capped decoder.

aiohttp's own Content-Encoding decoding is switched off (`auto_decompress=False` on the runner): it would run
in the HTTP parser before authentication, answer 400 in plain text for what it cannot decode, and bound only
the output size. Here decompression happens after authentication, bounded by output size and ratio, and every
failure maps to the gateway's own JSON errors.
"""

from __future__ import annotations

import asyncio
import zlib
from typing import Protocol

from backports import zstd

from gateway.config import Limits
from gateway.errors import BadRequest, PayloadTooLarge, RequestTimeout, UnsupportedMedia

_CHUNK = 64 * 1024
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


async def read_body(stream: _Stream, content_length: int | None, limits: Limits, timeout_s: float) -> bytes:
    """The raw (still compressed) body: at most `max_compressed_bytes`, within `timeout_s`."""
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
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeout(f"body not received within {timeout_s:g}s") from None
    return b"".join(chunks)


def decompress(raw: bytes, encoding: str, limits: Limits) -> bytes:
    """Decode `raw` with a streaming decoder whose output never exceeds the body cap or the ratio cap."""
    if encoding == "identity":
        if len(raw) > limits.max_body_bytes:
            raise PayloadTooLarge(f"body exceeds {limits.max_body_bytes} bytes", code="body_too_large")
        return raw
    by_ratio = max(len(raw), 1) * limits.max_ratio
    cap = min(limits.max_body_bytes, by_ratio)
    out = _inflate(raw, encoding, cap)
    if len(out) > cap:
        if cap == by_ratio and by_ratio < limits.max_body_bytes:
            raise PayloadTooLarge(f"decompression ratio exceeds {limits.max_ratio}", code="ratio_too_large")
        raise PayloadTooLarge(f"decompressed body exceeds {limits.max_body_bytes} bytes", code="body_too_large")
    return out


def _new_decoder(encoding: str) -> _Decoder:
    if encoding == "zstd":
        return zstd.ZstdDecompressor()
    return zlib.decompressobj(wbits=31)  # gzip framing only


def _inflate(raw: bytes, encoding: str, cap: int) -> bytes:
    """Up to cap + 1 bytes of output (one more than allowed tells the caller it is over); multi-member aware."""
    parts: list[bytes] = []
    produced = 0
    pending = raw
    try:
        while pending:
            decoder = _new_decoder(encoding)
            chunk = decoder.decompress(pending, cap + 1 - produced)
            parts.append(chunk)
            produced += len(chunk)
            while not decoder.eof and produced <= cap:
                chunk = decoder.decompress(b"", cap + 1 - produced) if encoding == "zstd" else \
                    _zlib_more(decoder, cap + 1 - produced)
                if not chunk:
                    break
                parts.append(chunk)
                produced += len(chunk)
            if produced > cap:
                break
            if not decoder.eof:
                raise BadRequest(f"truncated {encoding} body", code="invalid_compression")
            pending = decoder.unused_data
    except (zstd.ZstdError, zlib.error) as exc:
        raise BadRequest(f"corrupt {encoding} body: {exc}", code="invalid_compression") from None
    return b"".join(parts)


def _zlib_more(decoder: _Decoder, max_length: int) -> bytes:
    # zlib keeps input it could not yet emit in unconsumed_tail; feed it back.
    tail: bytes = getattr(decoder, "unconsumed_tail", b"")
    return decoder.decompress(tail, max_length)
