"use strict";
/** Delivery counters: what was accepted, sent, acknowledged, rejected, dropped (by reason) and retried. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.Counters = void 0;
/** Mutable counters; `settled` (acked + rejected + dropped after acceptance) drives flush() and close(). */
class Counters {
    sent = 0;
    acknowledged = 0;
    rejected = 0;
    retries = 0;
    batchesSent = 0;
    settled = 0;
    dropped = {};
    lostMark = 0; // accepted events lost (rejected or dropped) at the previous noLossSinceLastCheck()
    waiters = [];
    /** Count events that reached a final state, and wake flush() waiters whose target is reached. */
    settle(acknowledged, rejected, dropped) {
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
            for (const w of ready)
                w.resolve();
        }
    }
    /** True if no accepted event was rejected or dropped since the previous call (or the start). */
    noLossSinceLastCheck() {
        const lost = this.settled - this.acknowledged;
        const none = lost === this.lostMark;
        this.lostMark = lost;
        return none;
    }
    /** Count events refused before they were accepted (no seq): not part of `settled`. */
    refuse(reason, count = 1) {
        this.dropped[reason] = (this.dropped[reason] ?? 0) + count;
    }
    /** Resolves true once `settled` reaches `target`, or false after `timeoutMs` (the waiter is then removed). */
    until(target, timeoutMs) {
        if (this.settled >= target)
            return Promise.resolve(true);
        return new Promise((resolve) => {
            let timer;
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
    get waiting() {
        return this.waiters.length;
    }
    snapshot(queued, enqueued, store, spooled, inFlightLimit) {
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
exports.Counters = Counters;
