"use strict";
/**
 * The SDK's error tree; every error the SDK throws or reports is one of these, each with a stable `code`.
 *
 * ```
 * HeadwaterError
 * ├── ConfigError              bad option or environment variable; thrown by the constructor / fromEnv()
 * │   └── SpoolLockedError     another live client owns this spool directory
 * ├── InvalidEventError        bad arguments to track(); thrown by track()
 * ├── SubscriptionError        subscribe(): a refusal that is not retried (subscribe.ts)
 * └── DeliveryError            reported through the client's events, never thrown by track()
 *     ├── EventsDroppedError   events dropped, with the reason and the count
 *     ├── BatchRejectedError   the gateway refused a whole batch without retry (4xx, 413 of one event)
 *     ├── EventRejectedError   the gateway rejected one event of a batch (listed in a 200/422 answer)
 *     ├── UndeliveredError     close()/flush() ended before every accepted event was delivered
 *     └── TransportError       connection error, timeout or retryable status (retried)
 *         └── RetryableStatusError  408 / 429 / 5xx, with Retry-After when given
 * ```
 */
Object.defineProperty(exports, "__esModule", { value: true });
exports.RetryableStatusError = exports.TransportError = exports.UndeliveredError = exports.EventRejectedError = exports.BatchRejectedError = exports.EventsDroppedError = exports.DeliveryError = exports.InvalidEventError = exports.SpoolLockedError = exports.ConfigError = exports.HeadwaterError = void 0;
class HeadwaterError extends Error {
    code;
    constructor(code, message) {
        super(message);
        this.name = new.target.name;
        this.code = code;
    }
}
exports.HeadwaterError = HeadwaterError;
class ConfigError extends HeadwaterError {
    constructor(message, code = "config_error") {
        super(code, message);
    }
}
exports.ConfigError = ConfigError;
class SpoolLockedError extends ConfigError {
    constructor(message) {
        super(message, "spool_locked");
    }
}
exports.SpoolLockedError = SpoolLockedError;
class InvalidEventError extends HeadwaterError {
    constructor(message) {
        super("invalid_event", message);
    }
}
exports.InvalidEventError = InvalidEventError;
class DeliveryError extends HeadwaterError {
}
exports.DeliveryError = DeliveryError;
class EventsDroppedError extends DeliveryError {
    reason;
    count;
    constructor(reason, count, detail) {
        super(reason, `${count} event(s) dropped (${reason}): ${detail}`);
        this.reason = reason;
        this.count = count;
    }
}
exports.EventsDroppedError = EventsDroppedError;
class BatchRejectedError extends DeliveryError {
    batchId;
    status;
    count;
    constructor(batchId, status, code, message, count) {
        super(code, `batch ${batchId} refused with HTTP ${status} ${code}: ${message}`);
        this.batchId = batchId;
        this.status = status;
        this.count = count;
    }
}
exports.BatchRejectedError = BatchRejectedError;
class EventRejectedError extends DeliveryError {
    batchId;
    eventId;
    seq;
    constructor(batchId, eventId, seq, code, message) {
        super(code, `event ${eventId} (seq ${seq}) rejected: ${code} ${message}`);
        this.batchId = batchId;
        this.eventId = eventId;
        this.seq = seq;
    }
}
exports.EventRejectedError = EventRejectedError;
class UndeliveredError extends DeliveryError {
    undelivered;
    constructor(undelivered, message) {
        super("undelivered", message);
        this.undelivered = undelivered;
    }
}
exports.UndeliveredError = UndeliveredError;
class TransportError extends DeliveryError {
    constructor(message, code = "transport_error") {
        super(code, message);
    }
}
exports.TransportError = TransportError;
class RetryableStatusError extends TransportError {
    status;
    /** Seconds from the Retry-After header, or undefined. */
    retryAfter;
    constructor(status, retryAfter, message) {
        super(`HTTP ${status} ${message}`.trim(), `http_${status}`);
        this.status = status;
        this.retryAfter = retryAfter;
    }
}
exports.RetryableStatusError = RetryableStatusError;
