"""Read keys: parse the hashed key store, read credentials from a request, resolve them to a name and its scopes.

Read keys are `hwr_` + 32 random bytes (base64url), distinct from the gateway's write keys (`hw_` + ...): a write
key is refused here by its form, before any lookup, so it can never read even if its hash were configured. As
for write keys, configuration holds only SHA-256 hashes: `name:sha256hex:scope|scope[:revoked]`.

A key comes in the `Authorization` header (`Bearer <key>`) or, for a browser's `EventSource` (which cannot set
headers), in the `access_token` query parameter (RFC 6750, section 2.3). The server never logs a query string.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from subscribe.errors import Forbidden, Unauthorized
from subscribe.streams import in_scope, valid_scope

READ_PREFIX = "hwr_"
WRITE_PREFIX = "hw_"
MAX_KEY_CHARS = 256
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def new_read_key() -> str:
    """A fresh high-entropy read key."""
    return READ_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ReadKey:
    name: str
    sha256: str
    scopes: tuple[str, ...]
    revoked: bool = False

    def allows(self, stream: str) -> bool:
        return in_scope(stream, self.scopes)


@dataclass(frozen=True)
class ReadKeys:
    """Hashed read keys by hash."""

    by_hash: dict[str, ReadKey]

    def authenticate(self, header: str | None, query_token: str | None) -> ReadKey:
        """The key a request presents; Unauthorized (401) / Forbidden (403) with a stable code otherwise."""
        key = presented(header, query_token)
        if key.startswith(WRITE_PREFIX):
            raise Forbidden("a write key cannot read: use a read key (hwr_...)", code="write_key_not_allowed")
        if not key.startswith(READ_PREFIX) or len(key) > MAX_KEY_CHARS:
            raise Unauthorized("unknown read key", code="invalid_read_key")
        digest = hash_key(key)
        entry = self.by_hash.get(digest)
        if entry is None or not hmac.compare_digest(entry.sha256, digest):
            raise Unauthorized("unknown read key", code="invalid_read_key")
        if entry.revoked:
            raise Forbidden(f"read key {entry.name!r} is revoked", code="read_key_revoked")
        return entry


def presented(header: str | None, query_token: str | None) -> str:
    """The key of `Authorization: Bearer <key>`, else of `?access_token=<key>`."""
    if header:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("Authorization must be 'Bearer <read key>'", code="missing_read_key")
        return value.strip()
    if query_token:
        return query_token.strip()
    raise Unauthorized("missing read key (Authorization: Bearer <read key>, or ?access_token=<read key>)",
                       code="missing_read_key")


def parse_read_keys(raw: str) -> ReadKeys:
    """Comma- or newline-separated `name:sha256hex:scope|scope[:revoked]` (`#` starts a comment)."""
    by_hash: dict[str, ReadKey] = {}
    for line in re.split(r"[,\n]", raw):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] != "revoked"):
            raise ValueError(f"entry {item[:80]!r} is not name:sha256hex:scope|scope[:revoked]")
        name, digest = parts[0], parts[1].lower()
        if not _NAME.match(name):
            raise ValueError(f"key name {name!r} must match {_NAME.pattern}")
        if not _HEX.match(digest):
            raise ValueError(f"entry {name!r}: the hash must be 64 hex digits (sha256 of the key)")
        scopes = tuple(s.strip() for s in parts[2].split("|") if s.strip())
        bad = [s for s in scopes if not valid_scope(s)]
        if not scopes or bad:
            raise ValueError(f"entry {name!r}: scopes must be stream names, event.*, rule.* or * (got {parts[2]!r})")
        by_hash[digest] = ReadKey(name, digest, scopes, revoked=len(parts) == 4)
    return ReadKeys(by_hash)
