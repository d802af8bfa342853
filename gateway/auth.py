"""Write keys: parse the hashed key store, read credentials from a request header, resolve them to a source.

Keys are long random strings (`hw_` + 32 random bytes, base64url), so a plain SHA-256 is enough to store them:
a slow password hash protects low-entropy secrets against guessing, which 256 random bits already defeat.
Configuration holds only `source:sha256hex` (or `source:sha256hex:revoked`); a revoked key gets 403.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from gateway.errors import Forbidden, Unauthorized

_SOURCE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_HEX = re.compile(r"^[0-9a-f]{64}$")


def new_write_key() -> str:
    """A fresh high-entropy write key."""
    return "hw_" + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class KeyEntry:
    source: str
    sha256: str
    revoked: bool = False


@dataclass(frozen=True)
class KeyStore:
    """Hashed keys by hash; looking up a hash is constant time in the number of keys."""

    by_hash: dict[str, KeyEntry]

    def sources(self) -> set[str]:
        return {e.source for e in self.by_hash.values()}

    def authenticate(self, header: str | None) -> str:
        """The source name for an Authorization header value; raises Unauthorized / Forbidden."""
        key = credentials(header)
        digest = hash_key(key)
        entry = self.by_hash.get(digest)
        # The dict lookup is on the hash, never on the secret itself; compare again in constant time anyway.
        if entry is None or not hmac.compare_digest(entry.sha256, digest):
            raise Unauthorized("unknown write key", code="invalid_write_key")
        if entry.revoked:
            raise Forbidden(f"write key of source {entry.source!r} is revoked", code="write_key_revoked")
        return entry.source


def credentials(header: str | None) -> str:
    """The key of `Bearer <key>` or `Basic base64(<key>:)`."""
    if not header:
        raise Unauthorized("missing Authorization header (Bearer <write key>)", code="missing_write_key")
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer" and value:
        return value
    if scheme.lower() == "basic" and value:
        try:
            user, _, _password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthorized("malformed Basic credentials", code="invalid_write_key") from None
        if user:
            return user
    raise Unauthorized("Authorization must be 'Bearer <write key>' or Basic with the key as user name",
                       code="missing_write_key")


def parse_keys(raw: str) -> KeyStore:
    """Parse comma- or newline-separated `source:sha256hex[:revoked]` entries (`#` starts a comment)."""
    by_hash: dict[str, KeyEntry] = {}
    for line in re.split(r"[,\n]", raw):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        parts = item.split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "revoked"):
            raise ValueError(f"entry {item!r} is not source:sha256hex[:revoked]")
        source, digest = parts[0], parts[1].lower()
        if not _SOURCE.match(source):
            raise ValueError(f"source name {source!r} must match {_SOURCE.pattern}")
        if not _HEX.match(digest):
            raise ValueError(f"entry for {source!r}: the hash must be 64 hex digits (sha256 of the key)")
        by_hash[digest] = KeyEntry(source, digest, revoked=len(parts) == 3)
    return KeyStore(by_hash)
