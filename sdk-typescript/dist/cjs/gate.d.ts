/**
 * The client's gate (protocol.md §6.1): a Retry-After holds every send, one send probes a failing gateway, and
 * any answer (or close()) wakes every wait, backoffs included.
 */
import type { TransportError } from "./errors.js";
/** Who may send now, for every delivery of one client; deliveries are told apart by an id from `newId`. */
export declare class Gate {
    private readonly closingMaxMs;
    private readonly abort;
    /** Hears of the first failure of each streak, and of the recovery. */
    private readonly report;
    private readonly recovered;
    private readonly now;
    private ids;
    private prober;
    private streakSince;
    private failures;
    private notBefore;
    private wakes;
    private closing;
    private readonly waiters;
    constructor(closingMaxMs: number, abort: AbortSignal, 
    /** Hears of the first failure of each streak, and of the recovery. */
    report: (error: TransportError) => void, recovered?: (afterMs: number, failures: number) => void, now?: () => number);
    /** A new delivery's id (its retries share it). */
    newId(): number;
    /** Wait while a Retry-After holds or another delivery probes a failing gateway; false once aborted. */
    enter(me: number): Promise<boolean>;
    /** No send of this client goes for `ms` (a Retry-After), also after a deadline. */
    hold(ms: number): void;
    /** A backoff as it will be waited: at most `retryRefusedMaxMs` while close() waits. */
    capped(ms: number): number;
    /** Wait `ms` (see `capped`); ends early at a wake-up after `since` (from `failed`); false once aborted. */
    backoff(ms: number, since: number): Promise<boolean>;
    /**
     * A retryable failure of delivery `me`: a streak starts (`me` probes) unless one runs. Returns the wake-up
     * count to pass to `backoff`, so an answer that comes before the backoff starts still ends it.
     */
    failed(me: number, error: TransportError): number;
    /** A request got an answer: the streak ends and every wait ends. */
    answered(): void;
    /**
     * The client moved to another endpoint (protocol.md §9): the streak and any Retry-After hold (the old
     * endpoint's) end, and every wait ends, so pending batches go to the new endpoint at once.
     */
    switched(): void;
    /** Delivery `me` stops probing (deadline or stop); the next delivery at the gate probes. */
    gaveUp(me: number): void;
    /** End every wait now; `closing`: close() started, so later backoffs are capped as well. */
    wake(closing?: boolean): void;
    private notify;
    /** Resolves at the next notify, after `timeoutMs`, or at the abort; its timer never keeps the process alive. */
    private changed;
}
