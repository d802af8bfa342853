/**
 * The retry rule (protocol.md §4 and §6): classify a status (pure), and full-jitter backoff that is never
 * shorter than Retry-After.
 */
/** What an HTTP status means for a batch. */
export type Outcome = "done" | "split" | "retry" | "refused";
/** 200/422 done; 413 split; 408, 429, 500, 502, 503, 504 retry; every other status refused. */
export declare function classify(status: number): Outcome;
/** A Retry-After is honoured up to this many times `retryMaxMs` (protocol.md §6). */
export declare const RETRY_AFTER_CAP_FACTOR = 10;
/** Milliseconds to wait before retry `attempt` (1-based): full jitter, never shorter than `retryAfterS`. */
export declare function backoffMs(attempt: number, baseMs: number, capMs: number, retryAfterS: number | undefined, random?: () => number): number;
