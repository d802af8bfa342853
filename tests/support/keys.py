"""Write keys for tests: the key a client sends and the gateway's setting that accepts it (only its SHA-256)."""

from __future__ import annotations

import hashlib

WRITE_KEY = "hw_test-key-0123456789abcdefghijklmnopqrstuvwxyz"


def key_entry(key: str = WRITE_KEY, source: str = "dev", *, revoked: bool = False) -> str:
    """One entry of HEADWATER_GATEWAY_WRITE_KEYS: `source:sha256hex[:revoked]`."""
    return f"{source}:{hashlib.sha256(key.encode()).hexdigest()}{':revoked' if revoked else ''}"


def gateway_keys(key: str = WRITE_KEY, source: str = "dev") -> dict[str, str]:
    """The gateway setting that accepts `key` as `source`."""
    return {"HEADWATER_GATEWAY_WRITE_KEYS": key_entry(key, source)}
