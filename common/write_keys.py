"""One entry of the gateway's write-key setting (HEADWATER_GATEWAY_WRITE_KEYS) for a key the caller holds.

The gateway stores only a key's SHA-256 (gateway/auth.py); the tools that start a gateway of their own (the load
test, the benchmarks, the conformance runner) build its setting here instead of hashing by hand.
"""

from __future__ import annotations

import hashlib


def key_entry(key: str, source: str, *, revoked: bool = False) -> str:
    """`source:sha256hex`, with `:revoked` when the key is refused."""
    return f"{source}:{hashlib.sha256(key.encode()).hexdigest()}{':revoked' if revoked else ''}"
