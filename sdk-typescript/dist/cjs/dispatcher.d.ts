/**
 * The send pump: up to `maxInFlight` deliveries at once (each request inside the adaptive in-flight window and
 * the client's gate, see sender.ts), each batch's outcome applied to the store.
 */
import type { Config } from "./config.js";
import { type DeliveryError } from "./errors.js";
import type { Counters } from "./metrics.js";
import type { Sender } from "./sender.js";
import type { Store } from "./store.js";
/** Takes ready batches from the store, delivers them, and acks, splits or releases them afterwards. */
export declare class Dispatcher {
    private readonly cfg;
    private readonly store;
    private readonly sender;
    private readonly durable;
    private readonly abort;
    private readonly counters;
    private readonly fail;
    /** Called after each send settled: the store may have room for queued batches. */
    private readonly afterSend;
    private inFlight;
    private readonly sends;
    constructor(cfg: Config, store: Store, sender: Sender, durable: boolean, abort: AbortSignal, counters: Counters, fail: (error: DeliveryError) => void, 
    /** Called after each send settled: the store may have room for queued batches. */
    afterSend: () => void);
    /** Start sends while fewer than `maxInFlight` are running and batches are ready. */
    pump(): void;
    /** After the abort: wait (at most `boundMs`) until every send has settled. */
    drain(boundMs: number): Promise<void>;
    private settle;
}
