/**
 * Reporting delivery problems when the application listens to no `failure` event: a warning per kind (error
 * class and code) at once, then at most one every 10 s with the count of events of that kind since the previous
 * one, so a second and a third rejection code are seen too and the counts stay right; `close()` warns what is
 * still uncounted.
 */
import { BatchRejectedError, EventsDroppedError } from "./errors.js";
export const INTERVAL_MS = 10_000;
const emit = (message, code) => process.emitWarning(message, { code });
/** Rate-limited warnings per kind of delivery problem. */
export class Reporter {
    warn;
    intervalMs;
    now;
    kinds = new Map();
    constructor(warn = emit, intervalMs = INTERVAL_MS, now = Date.now) {
        this.warn = warn;
        this.intervalMs = intervalMs;
        this.now = now;
    }
    /** Warn about `error` now, or count it for the next warning of its kind. */
    report(error) {
        const key = `${error.name}:${error.code}`;
        const count = error instanceof EventsDroppedError || error instanceof BatchRejectedError ? error.count : 1;
        const now = this.now();
        const state = this.kinds.get(key);
        if (state !== undefined && now - state.last < this.intervalMs) {
            state.suppressed += count;
            return;
        }
        const more = state !== undefined && state.suppressed > 0
            ? ` (and ${state.suppressed} more event(s) like it in the last ${Math.round((now - state.last) / 1000)} s)` : "";
        this.kinds.set(key, { last: now, suppressed: 0 });
        this.warn(`headwater: ${error.message}${more} (add a 'failure' listener to see every report)`, error.code);
    }
    /** Warn the counts not warned yet. */
    close() {
        for (const [key, state] of this.kinds) {
            if (state.suppressed > 0) {
                const code = key.slice(key.indexOf(":") + 1);
                this.warn(`headwater: ${state.suppressed} more event(s) of kind ${key} not warned about individually`, code);
            }
        }
        this.kinds.clear();
    }
}
