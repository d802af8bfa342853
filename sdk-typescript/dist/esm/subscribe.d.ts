/**
 * Live subscriptions: `subscribe(endpoint, readKey, stream, options)` is an async iterable of a stream's records as
 * the subscription server pushes them (Server-Sent Events); after any disconnect it resumes exactly after the last
 * record it gave you.
 *
 * ```ts
 * const sub = subscribe("http://subscribe:8082", "hwr_...", "rule.slow_pages_alert");
 * for await (const record of sub) console.log(record.value); // record.id is its position
 * ```
 *
 * Reconnects (a dropped connection, a restart, a cut-off after falling behind, 429/5xx) wait with jittered backoff,
 * never less than the server's `retry` or `Retry-After`; any other refusal throws `SubscriptionError`.
 */
import { HeadwaterError } from "./errors.js";
export interface SubscribeOptions {
    /** Where the first connection starts: "latest" (default), "earliest", epoch ms or an ISO 8601 time. */
    start?: string | number;
    /** Equality filter: { "field.path": value | [values] } (docs/subscriptions.md). */
    filter?: Record<string, unknown>;
    /** Resume from a position kept earlier (a record's `id`). */
    lastEventId?: string;
    /** Reconnect when nothing, not even a heartbeat, arrives for this long (default 60000). */
    readTimeoutMs?: number;
    /** Longest wait between reconnects (default 30000). */
    maxBackoffMs?: number;
    /** An injectable fetch (tests). */
    fetch?: typeof fetch;
}
export interface StreamRecord {
    /** The position after this record: pass it as `lastEventId` to resume. */
    id: string;
    stream: string;
    partition: number;
    offset: number;
    timestamp: number;
    key: string | null;
    value: unknown;
    schema: {
        id: number;
        subject: string | null;
        version: number | null;
    } | null;
    headers: Record<string, string>;
    /** Set when the server could not decode the record (then `value` is null). */
    error?: {
        code: string;
        message: string;
    };
}
/** The server refused the subscription and retrying would not help (a bad key, scope, stream or filter). */
export declare class SubscriptionError extends HeadwaterError {
    readonly status: number;
    constructor(status: number, code: string, message: string);
}
interface SseMessage {
    event: string;
    data: string;
    id: string | undefined;
}
/** The WHATWG event-stream format: text in, messages out; an id-only message moves `lastId`. */
export declare class SseParser {
    private readonly maxLine;
    lastId: string | undefined;
    retryMs: number | undefined;
    private buf;
    private event;
    private data;
    private id;
    private afterCr;
    constructor(maxLine?: number);
    feed(text: string): SseMessage[];
    private line;
    private dispatch;
}
export declare class Subscription implements AsyncIterable<StreamRecord> {
    private readonly readKey;
    private readonly options;
    lastEventId: string | undefined;
    /** Records deleted by retention before a resume could read them (`gap` messages). */
    readonly gaps: unknown[];
    cutoffs: number;
    reconnects: number;
    private readonly url;
    private readonly fetchFn;
    private readonly abort;
    constructor(endpoint: string, readKey: string, stream: string, options?: SubscribeOptions);
    /** Ends the iteration and closes the connection. */
    close(): void;
    [Symbol.asyncIterator](): AsyncIterator<StreamRecord>;
    private connect;
    private message;
    private refused;
}
/** Subscribe to `stream` (`event.<type>`, `rule.<name>`, `deadletter`, `aggregates`) with a read key. */
export declare function subscribe(endpoint: string, readKey: string, stream: string, options?: SubscribeOptions): Subscription;
export {};
