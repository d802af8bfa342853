/** Delivery counters: what was accepted, sent, acknowledged, rejected, dropped (by reason) and retried. */
/**
 * A snapshot of a client's counters (events unless the name says batches or bytes). `queued`: events in
 * memory not yet handed to the store. `enqueued`: events accepted by `track()`. `sent`: events in batches
 * handed to the transport (a batch resent after its retry deadline counts again). `acknowledged`: events the
 * gateway accepted. `rejected`: events the gateway rejected permanently. `dropped`: events dropped, by reason.
 * `retries`: retried send attempts. `pendingBatches`/`pendingEvents`: sealed but not yet acknowledged.
 * `spoolBytes`: bytes held by the store. `spooledEvents`: pending events already in spool files (they survive a
 * crash; the others are still being written). `inFlightLimit`: the adaptive in-flight window now (protocol.md
 * §6.2), between 1 and `maxInFlight`. `endpoint`: the endpoint sent to now; `failovers` / `failbacks`: moves to
 * the next endpoint / back to an earlier one (protocol.md §9).
 */
export interface Metrics {
    queued: number;
    enqueued: number;
    sent: number;
    acknowledged: number;
    rejected: number;
    dropped: Record<string, number>;
    droppedTotal: number;
    retries: number;
    batchesSent: number;
    pendingBatches: number;
    pendingEvents: number;
    spoolBytes: number;
    spooledEvents: number;
    inFlightLimit: number;
    endpoint: string;
    failovers: number;
    failbacks: number;
}
/** What the counters know; the client adds the failover figures. */
export type CounterSnapshot = Omit<Metrics, "endpoint" | "failovers" | "failbacks">;
/** Mutable counters; `settled` (acked + rejected + dropped after acceptance) drives flush() and close(). */
export declare class Counters {
    sent: number;
    acknowledged: number;
    rejected: number;
    retries: number;
    batchesSent: number;
    settled: number;
    readonly dropped: Record<string, number>;
    private lostMark;
    private waiters;
    /** Count events that reached a final state, and wake flush() waiters whose target is reached. */
    settle(acknowledged: number, rejected: number, dropped?: Record<string, number>): void;
    /** True if no accepted event was rejected or dropped since the previous call (or the start). */
    noLossSinceLastCheck(): boolean;
    /** Count events refused before they were accepted (no seq): not part of `settled`. */
    refuse(reason: string, count?: number): void;
    /** Resolves true once `settled` reaches `target`, or false after `timeoutMs` (the waiter is then removed). */
    until(target: number, timeoutMs?: number): Promise<boolean>;
    /** Waiters of flush() calls in progress. */
    get waiting(): number;
    snapshot(queued: number, enqueued: number, store: [number, number, number], spooled: number, inFlightLimit: number): CounterSnapshot;
}
