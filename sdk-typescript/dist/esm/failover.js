/**
 * Several endpoints (protocol.md §9): which one the client sends to, when it fails over, and when it fails back.
 *
 * `Endpoints` is a pure core with a clock: the sender asks it for the active endpoint before each attempt and
 * tells it what the attempt got. A connection error, a timeout, 502, 503 or 504 from the active endpoint extends
 * its failure streak; any other answer (200, 4xx, 429, 500, ...) ends it. When the streak holds
 * `afterFailures` attempts AND spans `afterMs`, the client moves to the next endpoint (after the last: the
 * first). While it is not on the first, one send at a time probes the earlier endpoints (`GET /readyz`) at most
 * every `probeEveryMs`, and the client returns to the first that answers 200.
 */
/** Statuses that say "this endpoint cannot take the batch now". */
export function healthFailure(status) {
    return status === 502 || status === 503 || status === 504;
}
export const READY_PATH = "/readyz";
/** A probe waits at most this long (or `requestTimeoutMs` if shorter). */
export const PROBE_TIMEOUT_MS = 2_000;
/** The ordered endpoints of one client and the failover state. */
export class Endpoints {
    afterFailures;
    afterMs;
    probeEveryMs;
    now;
    urls;
    failovers = 0;
    failbacks = 0;
    active = 0;
    since; // start of the active endpoint's failure streak
    failures = 0;
    nextProbe = 0;
    probing = false;
    constructor(urls, afterFailures, afterMs, probeEveryMs, now = () => performance.now()) {
        this.afterFailures = afterFailures;
        this.afterMs = afterMs;
        this.probeEveryMs = probeEveryMs;
        this.now = now;
        if (urls.length === 0)
            throw new RangeError("at least one endpoint");
        this.urls = urls.map((u) => u.replace(/\/+$/, ""));
    }
    /** The active endpoint's index and base URL. */
    current() {
        return [this.active, this.urls[this.active]];
    }
    /**
     * An attempt sent to endpoint `index` failed (connection error, timeout, 502/503/504); a Switch when the
     * streak reached the bound. Failures of an endpoint no longer active do not count.
     */
    failed(index) {
        if (index !== this.active || this.urls.length === 1)
            return undefined;
        const now = this.now();
        this.since ??= now;
        this.failures += 1;
        const spentMs = now - this.since;
        if (this.failures < this.afterFailures || spentMs < this.afterMs)
            return undefined;
        const old = this.active;
        const failures = this.failures;
        this.move((this.active + 1) % this.urls.length, now);
        this.failovers += 1;
        return { old: this.urls[old], new: this.urls[this.active], failback: false, failures, spentMs };
    }
    /** Endpoint `index` answered (anything but 502/503/504): its failure streak ends. */
    answered(index) {
        if (index !== this.active)
            return;
        this.since = undefined;
        this.failures = 0;
    }
    /** The endpoints to probe now, in order; empty when on the first, when no probe is due, or while one runs. */
    probeTargets() {
        if (this.active === 0 || this.probing || this.now() < this.nextProbe)
            return [];
        this.probing = true;
        return Array.from({ length: this.active }, (_v, i) => i);
    }
    /** The probe found endpoint `ready` ready (undefined: none was); a Switch back to it. */
    probed(ready) {
        this.probing = false;
        const now = this.now();
        this.nextProbe = now + this.probeEveryMs;
        if (ready === undefined || ready >= this.active)
            return undefined;
        const old = this.active;
        this.move(ready, now);
        this.failbacks += 1;
        return { old: this.urls[old], new: this.urls[ready], failback: true, failures: 0, spentMs: 0 };
    }
    move(index, now) {
        this.active = index;
        this.since = undefined;
        this.failures = 0;
        this.nextProbe = now + this.probeEveryMs;
    }
}
