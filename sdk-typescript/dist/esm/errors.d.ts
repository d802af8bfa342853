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
export declare class HeadwaterError extends Error {
    readonly code: string;
    constructor(code: string, message: string);
}
export declare class ConfigError extends HeadwaterError {
    constructor(message: string, code?: string);
}
export declare class SpoolLockedError extends ConfigError {
    constructor(message: string);
}
export declare class InvalidEventError extends HeadwaterError {
    constructor(message: string);
}
export declare class DeliveryError extends HeadwaterError {
}
export declare class EventsDroppedError extends DeliveryError {
    readonly reason: string;
    readonly count: number;
    constructor(reason: string, count: number, detail: string);
}
export declare class BatchRejectedError extends DeliveryError {
    readonly batchId: string;
    readonly status: number;
    readonly count: number;
    constructor(batchId: string, status: number, code: string, message: string, count: number);
}
export declare class EventRejectedError extends DeliveryError {
    readonly batchId: string;
    readonly eventId: string;
    readonly seq: number;
    constructor(batchId: string, eventId: string, seq: number, code: string, message: string);
}
export declare class UndeliveredError extends DeliveryError {
    readonly undelivered: number;
    constructor(undelivered: number, message: string);
}
export declare class TransportError extends DeliveryError {
    constructor(message: string, code?: string);
}
export declare class RetryableStatusError extends TransportError {
    readonly status: number;
    /** Seconds from the Retry-After header, or undefined. */
    readonly retryAfter: number | undefined;
    constructor(status: number, retryAfter: number | undefined, message: string);
}
