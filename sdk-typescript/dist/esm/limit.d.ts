/**
 * The adaptive in-flight limit (protocol.md §6.2): how many requests one client keeps outstanding.
 *
 * `AdaptiveLimit` is the pure core (no clock): a window that grows while answers come back without queueing
 * (slow start, then additive increase, as TCP's congestion window), shrinks when the round-trip time says
 * requests queue at the gateway (Vegas, as Netflix's concurrency-limits), and halves at once on a retryable
 * failure (429, 503, a timeout, ...). `Window` hands out places to the client's sends.
 */
export declare const INITIAL_LIMIT = 4;
/** What one request's answer means for the window. */
export type Signal = "success" | "failure" | "neutral";
/** The window's state and its rules; every method is a pure update. */
export declare class AdaptiveLimit {
    readonly ceiling: number;
    limit: number;
    ssthresh: number;
    generation: number;
    private bucketMin;
    private olderMin;
    private bucketStart;
    private answered;
    constructor(ceiling: number);
    /** Requests that may be outstanding now. */
    get window(): number;
    /** The smallest round-trip time (ms) of the last 10 to 20 s (Infinity before the first). */
    get minRttMs(): number;
    /** The client moved to another endpoint: forget the minimum round-trip time (the new path has its own). */
    newPath(): void;
    /** A 200/422 after `rttMs`, answered at `nowMs`; `limited`: the request filled the window when it was sent. */
    succeeded(rttMs: number, limited: boolean, nowMs: number): void;
    /** A retryable failure of a request sent in `generation`: the window halves once per generation. */
    failed(generation: number): void;
}
/** A place in the window held by one request. */
export interface Slot {
    readonly generation: number;
    readonly limited: boolean;
    readonly startedMs: number;
}
/** `AdaptiveLimit` shared by the sends of one client: `acquire` resolves when a place is free. */
export declare class Window {
    private readonly now;
    readonly limit: AdaptiveLimit;
    private outstanding;
    private readonly waiting;
    private stopped;
    /** The most requests ever outstanding at once (connections the transport needed). */
    peak: number;
    constructor(ceiling: number, now?: () => number);
    /** A place in the window, when one is free; undefined once `stop()` was called. */
    acquire(): Promise<Slot | undefined>;
    /** Give the place back with what the request's answer says about the gateway. */
    release(slot: Slot, signal: Signal): void;
    /** Resolve every waiter with undefined, for good (the client's hard stop). */
    stop(): void;
    private take;
}
