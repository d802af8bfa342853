"""Unit tests of body reading and capped decompression."""

from __future__ import annotations

import asyncio
import gzip
import random

import pytest
import zstandard

from gateway import body as body_module
from gateway.body import content_encoding, decompress, read_body
from gateway.config import Limits
from gateway.errors import BadRequest, PayloadTooLarge, RequestTimeout, UnsupportedMedia

pytestmark = pytest.mark.unit
LIMITS = Limits(max_body_bytes=100_000, max_compressed_bytes=50_000, max_ratio=50)


def test_roundtrip_each_encoding() -> None:
    data = random.Random(1).randbytes(20_000)
    assert decompress(data, "identity", LIMITS) == data
    assert decompress(zstandard.ZstdCompressor().compress(data), "zstd", LIMITS) == data
    assert decompress(gzip.compress(data), "gzip", LIMITS) == data


def test_multi_frame_and_multi_member() -> None:
    z = zstandard.ZstdCompressor()
    assert decompress(z.compress(b"ab") + z.compress(b"cd"), "zstd", LIMITS) == b"abcd"
    assert decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), "gzip", LIMITS) == b"abcd"


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_bomb_is_cut_at_the_ratio(encoding: str) -> None:
    bomb = b"\0" * 10_000_000
    raw = zstandard.ZstdCompressor().compress(bomb) if encoding == "zstd" else gzip.compress(bomb)
    with pytest.raises(PayloadTooLarge) as info:
        decompress(raw, encoding, LIMITS)
    assert info.value.code in ("ratio_too_large", "body_too_large")


def test_over_body_cap_with_a_low_ratio() -> None:
    data = random.Random(3).randbytes(256_000)  # incompressible, 256 KB > 100 KB cap
    with pytest.raises(PayloadTooLarge) as info:
        decompress(zstandard.ZstdCompressor(level=1).compress(data), "zstd", Limits(max_body_bytes=100_000,
                                                                                  max_ratio=1000))
    assert info.value.code == "body_too_large"


def test_zstd_frame_declaring_a_small_size_cannot_overflow() -> None:
    # A frame whose header lies about its content size must still be capped by the streaming decoder.
    data = b"a" * 5_000_000
    raw = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    with pytest.raises(PayloadTooLarge):
        decompress(raw, "zstd", LIMITS)


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_truncated_and_corrupt(encoding: str) -> None:
    data = random.Random(2).randbytes(20_000)
    raw = zstandard.ZstdCompressor().compress(data) if encoding == "zstd" else gzip.compress(data)
    for bad in (raw[: len(raw) // 2], raw[:-3], b"garbage" * 10):
        with pytest.raises(BadRequest) as info:
            decompress(bad, encoding, LIMITS)
        assert info.value.code == "invalid_compression"


def test_encoding_header() -> None:
    assert content_encoding(None) == "identity"
    assert content_encoding(" ZSTD ") == "zstd"
    with pytest.raises(UnsupportedMedia):
        content_encoding("br")


class _Slow:
    def __init__(self, chunks: list[bytes], delay: float) -> None:
        self.chunks = chunks
        self.delay = delay

    async def read(self, n: int = -1) -> bytes:
        await asyncio.sleep(self.delay)
        return self.chunks.pop(0) if self.chunks else b""


def test_read_body_limits_and_timeout() -> None:
    async def run() -> None:
        assert await read_body(_Slow([b"ab", b"cd"], 0), 4, LIMITS, 1.0) == b"abcd"
        with pytest.raises(PayloadTooLarge):
            await read_body(_Slow([], 0), 60_000, LIMITS, 1.0)  # declared length over the cap: not even read
        with pytest.raises(PayloadTooLarge):
            await read_body(_Slow([b"x" * 30_000] * 2, 0), None, LIMITS, 1.0)  # chunked, over the cap
        with pytest.raises(RequestTimeout):
            await read_body(_Slow([b"x"] * 100, 0.05), None, LIMITS, 0.2)

    asyncio.run(run())


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_frames_across_slice_boundaries(encoding: str) -> None:
    rng = random.Random(4)
    pieces = [rng.randbytes(rng.randrange(0, 9_000)) + b"a" * rng.randrange(0, 30_000) for _ in range(60)]
    z = zstandard.ZstdCompressor()
    raw = b"".join(z.compress(p) if encoding == "zstd" else gzip.compress(p) for p in pieces)
    limits = Limits(max_body_bytes=10_000_000, max_ratio=1000, max_frames=60)
    assert decompress(raw, encoding, limits) == b"".join(pieces)
    with pytest.raises(PayloadTooLarge) as info:
        decompress(raw, encoding, Limits(max_body_bytes=10_000_000, max_ratio=1000, max_frames=59))
    assert info.value.code == "too_many_frames"


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_decoders_are_fed_each_input_byte_about_once(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear in the input: 1 MiB of empty frames must not be copied once per frame (issue 14, item 1)."""
    fed = [0]
    real = body_module._new_decoder

    class Counting:
        def __init__(self) -> None:
            self.inner = real(encoding)

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def decompress(self, data: bytes, max_length: int = -1) -> bytes:
            fed[0] += len(data)
            return self.inner.decompress(data, max_length)

    monkeypatch.setattr(body_module, "_new_decoder", lambda _encoding: Counting())
    frame = bytes.fromhex("28b52ffd2000010000") if encoding == "zstd" else gzip.compress(b"")
    raw = frame * (1024 * 1024 // len(frame))
    assert decompress(raw, encoding, Limits(max_frames=10**6)) == b""
    assert fed[0] <= 8 * len(raw), fed[0]  # about 64 bytes per frame; the whole rest of the body per frame before
