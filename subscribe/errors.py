"""The subscription server's errors: every refused request, its stable code and its HTTP status, in one place.

Each is answered `{"code": ..., "message": ...}` (docs/subscriptions.md, "Errors") before any event is sent; once
a stream has started, trouble is told in the stream itself (`event: cutoff`, `event: gap`).
"""

from __future__ import annotations

MAX_MESSAGE = 300


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` cut to `limit` characters: an error quotes client input, never much of it."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


class SubscribeError(Exception):
    """A refused request. `status` and `code` are the answer; `retry_after` is set for 429/503."""

    status = 500
    code = "internal_error"
    retry_after: int | None = None

    def __init__(self, message: str, *, code: str | None = None, retry_after: int | None = None) -> None:
        message = clip(message)
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if retry_after is not None:
            self.retry_after = retry_after


class BadRequest(SubscribeError):
    """A parameter cannot be used (400): the code says which (invalid_stream, invalid_from, invalid_filter, ...)."""

    status = 400
    code = "bad_request"


class Unauthorized(SubscribeError):
    """No read key, or an unknown one (401)."""

    status = 401
    code = "invalid_read_key"


class Forbidden(SubscribeError):
    """A key that may not read this stream: revoked, a write key, or outside its scope (403)."""

    status = 403
    code = "forbidden"


class NotFound(SubscribeError):
    """No such stream (its topic does not exist) or no such path (404)."""

    status = 404
    code = "unknown_stream"


class TooManyForKey(SubscribeError):
    """This key already holds its maximum of open subscriptions (429)."""

    status = 429
    code = "too_many_subscriptions"


class Unavailable(SubscribeError):
    """The instance cannot take this subscription now: full, shutting down, Kafka or registry trouble (503)."""

    status = 503
    code = "unavailable"


def error_body(code: str, message: str) -> dict[str, str]:
    """The JSON body of every 4xx/5xx answer."""
    return {"code": code, "message": message}
