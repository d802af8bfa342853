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
export class Counters {
  sent = 0;
  acknowledged = 0;
  rejected = 0;
  retries = 0;
  batchesSent = 0;
  settled = 0;
  readonly dropped: Record<string, number> = {};
  private lostMark = 0; // accepted events lost (rejected or dropped) at the previous noLossSinceLastCheck()
  private waiters: Array<{ target: number; resolve: () => void }> = [];

  /** Count events that reached a final state, and wake flush() waiters whose target is reached. */
  settle(acknowledged: number, rejected: number, dropped?: Record<string, number>): void {
    this.acknowledged += acknowledged;
    this.rejected += rejected;
    let n = acknowledged + rejected;
    for (const [reason, count] of Object.entries(dropped ?? {})) {
      this.dropped[reason] = (this.dropped[reason] ?? 0) + count;
      n += count;
    }
    this.settled += n;
    if (this.waiters.length > 0) {
      const ready = this.waiters.filter((w) => w.target <= this.settled);
      this.waiters = this.waiters.filter((w) => w.target > this.settled);
      for (const w of ready) w.resolve();
    }
  }

  /** True if no accepted event was rejected or dropped since the previous call (or the start). */
  noLossSinceLastCheck(): boolean {
    const lost = this.settled - this.acknowledged;
    const none = lost === this.lostMark;
    this.lostMark = lost;
    return none;
  }

  /** Count events refused before they were accepted (no seq): not part of `settled`. */
  refuse(reason: string, count = 1): void {
    this.dropped[reason] = (this.dropped[reason] ?? 0) + count;
  }

  /** Resolves true once `settled` reaches `target`, or false after `timeoutMs` (the waiter is then removed). */
  until(target: number, timeoutMs?: number): Promise<boolean> {
    if (this.settled >= target) return Promise.resolve(true);
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const waiter = { target, resolve: () => { clearTimeout(timer); resolve(true); } };
      this.waiters.push(waiter);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(false);
        }, timeoutMs);
      }
    });
  }

  /** Waiters of flush() calls in progress. */
  get waiting(): number {
    return this.waiters.length;
  }

  snapshot(queued: number, enqueued: number, store: [number, number, number], spooled: number, inFlightLimit: number): CounterSnapshot {
    const dropped = { ...this.dropped };
    return {
      queued,
      enqueued,
      sent: this.sent,
      acknowledged: this.acknowledged,
      rejected: this.rejected,
      dropped,
      droppedTotal: Object.values(dropped).reduce((a, b) => a + b, 0),
      retries: this.retries,
      batchesSent: this.batchesSent,
      pendingBatches: store[0],
      pendingEvents: store[1],
      spoolBytes: store[2],
      spooledEvents: spooled,
      inFlightLimit,
    };
  }
}
