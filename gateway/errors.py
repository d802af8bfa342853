"""The gateway's error hierarchy: every whole-request failure, its stable code and its HTTP status, in one place.

Per-event rejections are not exceptions: they are `Rejection` values (`gateway.records`, made by
`gateway.ingest`) listed in the 200/422 answer. Everything here aborts the whole request and nothing of it is
written. Messages are clipped (`clip`): an error never echoes more than a few hundred characters of input.
"""

from __future__ import annotations

MAX_MESSAGE = 300  # characters of a human message (error answer, rejection, dead letter)


def clip(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` cut to `limit` characters (with an ellipsis): messages may quote client input, never much of it."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


class GatewayError(Exception):
    """A whole-request failure. `status` and `code` are the answer; `retry_after` is set for 429/503."""

    status = 500
    code = "internal_error"
    retry_after: int | None = None

    def __init__(self, message: str, *, code: str | None = None) -> None:
        message = clip(message)
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class BadRequest(GatewayError):
    """The body cannot be decoded into a batch of identifiable events (400)."""

    status = 400
    code = "invalid_body"


class RequestTimeout(GatewayError):
    """The client did not send its body within the read timeout (408)."""

    status = 408
    code = "request_timeout"


class ClientGone(GatewayError):
    """The client closed the connection before its body arrived: its own doing, counted apart (never sent)."""

    status = 499
    code = "client_disconnected"


class Conflict(GatewayError):
    """A `batch_id` already answered for other events (409): a retry must resend the same events."""

    status = 409
    code = "batch_id_reused"


class Unauthorized(GatewayError):
    """No write key, or one that is unknown (401)."""

    status = 401
    code = "unauthorized"


class Forbidden(GatewayError):
    """A known write key that may not send (revoked) (403)."""

    status = 403
    code = "forbidden"


class PayloadTooLarge(GatewayError):
    """Over a size or count limit (413)."""

    status = 413
    code = "payload_too_large"


class UnsupportedMedia(GatewayError):
    """Unsupported Content-Type or Content-Encoding (415)."""

    status = 415
    code = "unsupported_media_type"


class Retryable(GatewayError):
    """Nothing was made visible; the client retries the same batch after `Retry-After` seconds (503)."""

    status = 503
    code = "unavailable"

    def __init__(self, message: str, *, code: str | None = None, retry_after: int = 1) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after


class Overloaded(Retryable):
    """In-flight caps reached (503)."""

    code = "overloaded"


class RateLimited(Retryable):
    """This source sends more events per second than its configured rate (429)."""

    status = 429
    code = "rate_limited"


class KafkaUnavailable(Retryable):
    """The transaction holding this batch was aborted or could not start (503)."""

    code = "kafka_unavailable"


class RegistryUnavailable(Retryable):
    """A schema needed for this batch could not be fetched (503)."""

    code = "registry_unavailable"


class ShuttingDown(Retryable):
    """The process is draining for shutdown (503)."""

    code = "shutting_down"


def error_body(code: str, message: str) -> dict[str, str]:
    """The JSON body of every 4xx/5xx answer (protocol.md section 4)."""
    return {"code": code, "message": message}
