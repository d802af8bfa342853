/**
 * The client's gate (protocol.md §6.1): a Retry-After holds every send, one send probes a failing gateway, and
 * any answer (or close()) wakes every wait, backoffs included.
 */
/** Who may send now, for every delivery of one client; deliveries are told apart by an id from `newId`. */
export class Gate {
    closingMaxMs;
    abort;
    report;
    recovered;
    now;
    ids = 0;
    prober = 0; // the delivery probing a failing gateway; 0 when none
    streakSince; // start of the failure streak
    failures = 0;
    notBefore = 0; // nobody sends before this (the server's Retry-After), in `now()` ms
    wakes = 0; // bumped by every wake-up: a backoff that sees it change ends
    closing = false;
    waiters = new Set();
    constructor(closingMaxMs, abort, 
    /** Hears of the first failure of each streak, and of the recovery. */
    report, recovered = () => { }, now = () => performance.now()) {
        this.closingMaxMs = closingMaxMs;
        this.abort = abort;
        this.report = report;
        this.recovered = recovered;
        this.now = now;
        abort.addEventListener("abort", () => this.notify(), { once: true });
    }
    /** A new delivery's id (its retries share it). */
    newId() {
        this.ids += 1;
        return this.ids;
    }
    /** Wait while a Retry-After holds or another delivery probes a failing gateway; false once aborted. */
    async enter(me) {
        for (;;) {
            if (this.abort.aborted)
                return false;
            const hold = this.notBefore - this.now();
            if (hold <= 0) {
                if (this.streakSince === undefined || this.prober === me)
                    return true;
                if (this.prober === 0) { // a streak whose prober gave up: this delivery probes now
                    this.prober = me;
                    return true;
                }
            }
            await this.changed(hold > 0 ? hold : undefined);
        }
    }
    /** No send of this client goes for `ms` (a Retry-After), also after a deadline. */
    hold(ms) {
        this.notBefore = Math.max(this.notBefore, this.now() + ms);
    }
    /** A backoff as it will be waited: at most `retryRefusedMaxMs` while close() waits. */
    capped(ms) {
        return this.closing ? Math.min(ms, this.closingMaxMs) : ms;
    }
    /** Wait `ms` (see `capped`); ends early at a wake-up after `since` (from `failed`); false once aborted. */
    async backoff(ms, since) {
        const deadline = this.now() + this.capped(ms);
        while (this.wakes === since) {
            if (this.abort.aborted)
                return false;
            const left = deadline - this.now();
            if (left <= 0)
                return true;
            await this.changed(left);
        }
        return !this.abort.aborted;
    }
    /**
     * A retryable failure of delivery `me`: a streak starts (`me` probes) unless one runs. Returns the wake-up
     * count to pass to `backoff`, so an answer that comes before the backoff starts still ends it.
     */
    failed(me, error) {
        const first = this.streakSince === undefined;
        if (first) {
            this.streakSince = this.now();
            this.prober = me;
        }
        this.failures += 1;
        if (first)
            this.report(error);
        return this.wakes;
    }
    /** A request got an answer: the streak ends and every wait ends. */
    answered() {
        const since = this.streakSince;
        const failures = this.failures;
        this.streakSince = undefined;
        this.failures = 0;
        this.prober = 0;
        this.wakes += 1;
        this.notify();
        if (since !== undefined)
            this.recovered(this.now() - since, failures);
    }
    /**
     * The client moved to another endpoint (protocol.md §9): the streak and any Retry-After hold (the old
     * endpoint's) end, and every wait ends, so pending batches go to the new endpoint at once.
     */
    switched() {
        this.streakSince = undefined;
        this.failures = 0;
        this.prober = 0;
        this.notBefore = 0;
        this.wakes += 1;
        this.notify();
    }
    /** Delivery `me` stops probing (deadline or stop); the next delivery at the gate probes. */
    gaveUp(me) {
        if (this.prober !== me)
            return;
        this.prober = 0;
        this.notify();
    }
    /** End every wait now; `closing`: close() started, so later backoffs are capped as well. */
    wake(closing = false) {
        this.closing = this.closing || closing;
        this.wakes += 1;
        this.notify();
    }
    notify() {
        const waiters = [...this.waiters];
        this.waiters.clear();
        for (const w of waiters)
            w();
    }
    /** Resolves at the next notify, after `timeoutMs`, or at the abort; its timer never keeps the process alive. */
    changed(timeoutMs) {
        return new Promise((resolve) => {
            let timer;
            const done = () => {
                clearTimeout(timer);
                this.waiters.delete(done);
                resolve();
            };
            this.waiters.add(done);
            if (timeoutMs !== undefined) {
                timer = setTimeout(done, timeoutMs);
                timer.unref();
            }
        });
    }
}
