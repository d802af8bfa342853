/**
 * Reporting delivery problems when the application listens to no `failure` event: a warning per kind (error
 * class and code) at once, then at most one every 10 s with the count of events of that kind since the previous
 * one, so a second and a third rejection code are seen too and the counts stay right; `close()` warns what is
 * still uncounted.
 */
import { type DeliveryError } from "./errors.js";
export declare const INTERVAL_MS = 10000;
type Warn = (message: string, code: string) => void;
/** Rate-limited warnings per kind of delivery problem. */
export declare class Reporter {
    private readonly warn;
    private readonly intervalMs;
    private readonly now;
    private readonly kinds;
    constructor(warn?: Warn, intervalMs?: number, now?: () => number);
    /** Warn about `error` now, or count it for the next warning of its kind. */
    report(error: DeliveryError): void;
    /** Warn the counts not warned yet. */
    close(): void;
}
export {};
