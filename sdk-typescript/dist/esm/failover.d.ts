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
export declare function healthFailure(status: number): boolean;
export declare const READY_PATH = "/readyz";
/** A probe waits at most this long (or `requestTimeoutMs` if shorter). */
export declare const PROBE_TIMEOUT_MS = 2000;
/** A move of the client to another endpoint; `failback` when it returned to an earlier one. */
export interface Switch {
    old: string;
    new: string;
    failback: boolean;
    failures: number;
    spentMs: number;
}
/** The ordered endpoints of one client and the failover state. */
export declare class Endpoints {
    private readonly afterFailures;
    private readonly afterMs;
    private readonly probeEveryMs;
    private readonly now;
    readonly urls: readonly string[];
    failovers: number;
    failbacks: number;
    private active;
    private since;
    private failures;
    private nextProbe;
    private probing;
    constructor(urls: readonly string[], afterFailures: number, afterMs: number, probeEveryMs: number, now?: () => number);
    /** The active endpoint's index and base URL. */
    current(): [number, string];
    /**
     * An attempt sent to endpoint `index` failed (connection error, timeout, 502/503/504); a Switch when the
     * streak reached the bound. Failures of an endpoint no longer active do not count.
     */
    failed(index: number): Switch | undefined;
    /** Endpoint `index` answered (anything but 502/503/504): its failure streak ends. */
    answered(index: number): void;
    /** The endpoints to probe now, in order; empty when on the first, when no probe is due, or while one runs. */
    probeTargets(): number[];
    /** The probe found endpoint `ready` ready (undefined: none was); a Switch back to it. */
    probed(ready: number | undefined): Switch | undefined;
    private move;
}
