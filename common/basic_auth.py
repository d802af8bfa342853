"""HTTP basic authentication for Headwater's own services (registry, console): the users file with salted password
hashes, the `Authorization` header, failed-attempt limits per source, and the client side's credentials.

Users file: one `name:role:hash` line per credential (`#` comments); `hash` is what `python -m common.basic_auth`
prints for a password read on stdin. A name may have several lines: each of its passwords works, which is how a
password is rotated without refusing anyone (add the new line, move the clients, delete the old line). The file is
read again when it changes (checked at most once a second).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common.component_env import ComponentEnv

SCHEME = "pbkdf2_sha256"
ITERATIONS = 200_000
RELOAD_CHECK_S = 1.0


class AuthConfigError(ValueError):
    """The users file or a credential variable is unusable; the message names it, never a secret."""


def hash_password(password: str, *, iterations: int = ITERATIONS, salt: bytes | None = None) -> str:
    """`pbkdf2_sha256$<iterations>$<salt>$<digest>` (base64), the form the users file holds."""
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{SCHEME}${iterations}${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


def _matches(password: str, stored: str) -> bool:
    scheme, iterations, salt, digest = stored.split("$")
    got = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    return scheme == SCHEME and hmac.compare_digest(got, base64.b64decode(digest))


@functools.cache
def _dummy() -> str:
    return hash_password("not a password")


@dataclass(frozen=True)
class Credential:
    name: str
    role: str
    stored: str  # the hash


def parse_users(text: str, source: str, roles: frozenset[str]) -> dict[str, list[Credential]]:
    """Every line checked now (a typo fails at start, naming the file and line, never showing a hash)."""
    users: dict[str, list[Credential]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        role, _, stored = rest.partition(":")
        if not name or role not in roles or not _well_formed(stored):
            raise AuthConfigError(f"{source} line {number}: expected name:role:{SCHEME}$... with role one of "
                                  f"{', '.join(sorted(roles))}")
        users.setdefault(name, []).append(Credential(name, role, stored))
    return users


def _well_formed(stored: str) -> bool:
    parts = stored.split("$")
    if len(parts) != 4 or parts[0] != SCHEME or not parts[1].isdigit() or not 1000 <= int(parts[1]) <= 10**7:
        return False
    try:
        base64.b64decode(parts[2], validate=True)
        base64.b64decode(parts[3], validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


class Users:
    """The credentials of one users file; `check` answers the role of a name and password, or None.

    A verified password is remembered (its SHA-256, per name) so that a client sending the same credentials on
    every request pays the slow hash once; the memory is dropped when the file changes.
    """

    def __init__(self, path: Path, roles: frozenset[str]) -> None:
        self.path = path
        self.roles = roles
        self._stamp: tuple[float, int] | None = None
        self._checked_at = 0.0
        self._users: dict[str, list[Credential]] = {}
        self._verified: dict[tuple[str, bytes], str] = {}
        self._load()

    def _load(self) -> None:
        try:
            stat = self.path.stat()
            text = self.path.read_text()
        except OSError as exc:
            raise AuthConfigError(f"{self.path}: {exc.strerror}") from None
        self._users = parse_users(text, str(self.path), self.roles)
        self._stamp = (stat.st_mtime, stat.st_size)
        self._verified.clear()

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < RELOAD_CHECK_S:
            return
        self._checked_at = now
        try:
            stat = self.path.stat()
            if (stat.st_mtime, stat.st_size) != self._stamp:
                self._load()
        except (OSError, AuthConfigError):
            pass  # keep serving with the last good file; the operator sees the error at the next start

    def check(self, name: str, password: str) -> str | None:
        """The role of `name` when `password` is one of its passwords; None otherwise (unknown names too)."""
        self._maybe_reload()
        key = (name, hashlib.sha256(password.encode()).digest())
        role = self._verified.get(key)
        if role is not None:
            return role
        creds = self._users.get(name)
        if not creds:
            _matches(password, _dummy())  # as slow as a known name: the time taken does not tell names apart
            return None
        for cred in creds:
            if _matches(password, cred.stored):
                self._verified[key] = cred.role
                return cred.role
        return None

    def cached(self, name: str, password: str) -> str | None:
        """The role when these credentials were verified before (no slow hash); None when unknown."""
        self._maybe_reload()
        return self._verified.get((name, hashlib.sha256(password.encode()).digest()))


def parse_authorization(header: str) -> tuple[str, str] | None:
    """(name, password) of a `Basic` Authorization header; None when absent or malformed."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    name, sep, password = decoded.partition(":")
    return (name, password) if sep and name else None


class FailureLimiter:
    """Failed attempts per source address, a token bucket each (bounded number of sources remembered): past the
    budget, a source is refused before any password is hashed, so guessing costs the guesser time, not us CPU."""

    def __init__(self, per_s: float = 2.0, burst: int = 10, max_sources: int = 10_000) -> None:
        self.per_s = per_s
        self.burst = burst
        self.max_sources = max_sources
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, source: str, now: float) -> float:
        tokens, at = self._buckets.get(source, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - at) * self.per_s)

    def blocked(self, source: str, now: float | None = None) -> float:
        """Seconds until `source` may try again (0: it may try now)."""
        now = time.monotonic() if now is None else now
        level = self._level(source, now)
        return 0.0 if level >= 1.0 else (1.0 - level) / self.per_s

    def failed(self, source: str, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._buckets[source] = (self._level(source, now) - 1.0, now)
        self._buckets.move_to_end(source)
        while len(self._buckets) > self.max_sources:
            self._buckets.popitem(last=False)


def user_info(env: Mapping[str, str], var: str, component: str = "") -> tuple[str, str] | None:
    """Client credentials `user:password` from `<var>_FILE` or `<var>` (as Confluent's `basic.auth.user.info`),
    per-component names first; None when unset."""
    e = ComponentEnv(env, component, error=AuthConfigError)
    raw = e.secret(var)
    if not raw:
        return None
    name, sep, password = raw.partition(":")
    if not sep or not name or not password:
        raise AuthConfigError(f"{e.name(var + '_FILE')} / {e.name(var)}: expected user:password")
    return name, password


def authorization(credentials: tuple[str, str]) -> str:
    """The `Authorization` header value for (name, password)."""
    return "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()


def main() -> int:
    """`python -m common.basic_auth < password`: print the hash of the password read on stdin."""
    password = sys.stdin.readline().rstrip("\n")
    if not password or sys.argv[1:]:
        print("usage: python -m common.basic_auth < file-holding-the-password", file=sys.stderr)
        return 2
    print(hash_password(password))
    return 0


if __name__ == "__main__":
    sys.exit(main())
