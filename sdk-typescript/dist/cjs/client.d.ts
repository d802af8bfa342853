/** The public client: track() (never blocks), the batch/linger timer, the send pump, flush(), close(). */
import { EventEmitter } from "node:events";
import { type Config, type HeadwaterOptions } from "./config.js";
import { type DeliveryError } from "./errors.js";
import type { Codec } from "./compress.js";
import { type TrackOptions } from "./event.js";
import { type Metrics } from "./metrics.js";
import { type DeliveryReport } from "./sender.js";
/** Options of flush() and close(): how long to wait, in milliseconds. */
export interface FlushOptions {
    readonly timeoutMs?: number;
}
/** What track() did: accepted with its seq and event id, or refused (counted in `metrics().dropped`). */
export type TrackResult = {
    readonly ok: true;
    readonly seq: number;
    readonly eventId: string;
} | {
    readonly ok: false;
    readonly reason: "queue_full" | "client_closed";
};
export type ClientState = "open" | "closing" | "closed";
/** The client's events: `delivery` per batch answered 200/422, `failure` for every problem reported. */
export interface HeadwaterEvents {
    delivery: [report: DeliveryReport];
    failure: [error: DeliveryError];
}
/** Sends events to a Headwater gateway in batches; see the README for every option. */
export declare class Headwater extends EventEmitter<HeadwaterEvents> {
    readonly config: Config;
    private stateValue;
    private readonly counters;
    private readonly store;
    private readonly spool;
    private readonly transport;
    private readonly sender;
    private readonly batcher;
    private readonly parts;
    private readonly abort;
    private readonly recovered;
    private nextSeq;
    private enqueued;
    private readonly dispatcher;
    private readonly gate;
    private readonly window;
    private readonly extraTransports;
    private lingerTimer;
    private closing;
    private readonly reporter;
    /** A client configured from `HEADWATER_*` variables; `overrides` win. */
    static fromEnv(overrides?: Partial<HeadwaterOptions>, env?: NodeJS.ProcessEnv): Headwater;
    constructor(options: HeadwaterOptions);
    private schemaCache;
    /** The body's codec: `encoding` (zstd, or gzip where zstd is unavailable) and its `implementation`. */
    codec(): Promise<Codec>;
    /** This producer's id: persisted in the spool directory, else new for each client. */
    get producerId(): string;
    /** "open", "closing" or "closed". */
    get state(): ClientState;
    /**
     * Queue one event; returns at once. Throws `InvalidEventError` for bad arguments only; a full queue or a
     * closed client is returned as `{ok: false}`, counted in `metrics().dropped` and emitted as `failure`.
     */
    track(eventType: string, properties?: Record<string, unknown> | null, options?: TrackOptions): TrackResult;
    /**
     * Send everything accepted so far and wait (at most `timeoutMs`, default no bound) until all of it is
     * acknowledged, rejected or dropped. Resolves true only if it all settled in time and no accepted event was
     * rejected or dropped since the previous flush() (or since the start): false tells the caller that events
     * were lost, as `metrics()` and the `failure` events say which.
     */
    flush(options?: FlushOptions): Promise<boolean>;
    /**
     * Flush for at most `timeoutMs` (default `exitTimeoutMs`), then stop. Resolves when every accepted event
     * was acknowledged; rejects with `UndeliveredError` otherwise (with a spool, what was not delivered stays
     * on disk for the next client). Idempotent: a second call settles the same way.
     */
    close(options?: FlushOptions): Promise<void>;
    /** close(), resolving true if every accepted event was acknowledged (never rejects). */
    closeQuietly(options?: FlushOptions): Promise<boolean>;
    /** @internal the exit hook. */
    closeForExit(): Promise<void>;
    /** A snapshot of the delivery counters. */
    metrics(): Metrics;
    private shutdown;
    private idleStoreEvents;
    private refuse;
    /** Report `error` to `failure` listeners; without one, warn (a line per kind at most every 10 s, with counts). */
    private fail;
    /** Emit without letting a listener's exception reach the delivery machinery. */
    private safeEmit;
    private storeDropped;
    private sealOpen;
    /** Hand sealed batches to the store while it has room (backpressure leaves them queued). */
    private moveSealed;
}
