/** Batch assembly: the open batch (at most N events and a byte cap) and the sealed batches waiting for the store. */
import { type Batch } from "./wire.js";
/** Bytes of a JSON batch body around its events: {"batch_id":...,"sent_at":...,"sdk":{...},"events":[...]}. */
export declare const BODY_OVERHEAD = 256;
/** Packs encoded events into batches in seq order; sealed batches wait here until the store has room. */
export declare class Batcher {
    private readonly producerId;
    private readonly maxEvents;
    private readonly maxBytes;
    private open;
    private openBytes;
    private openFirstSeq;
    private readonly waiting;
    private waitingEvents;
    /** Batches sealed so far. */
    sealedCount: number;
    constructor(producerId: string, maxEvents: number, maxBytes: number);
    /** True if an event of `size` bytes fits in an empty batch. */
    fitsAlone(size: number): boolean;
    /** Add an event (it must fit alone); returns true if this opened a new batch (start the linger timer). */
    add(json: string, size: number, seq: number): boolean;
    /** Seal the open batch, however small. */
    seal(): void;
    /** The oldest sealed batch, if `fits(its bytes)`; removed from the waiting line. */
    takeSealed(fits: (nbytes: number) => boolean): Batch | undefined;
    /** Evict the oldest queued event (policy `drop_oldest`); false if nothing is queued. */
    evictOldest(): boolean;
    /** Events not yet handed to the store (open + sealed waiting). */
    get queued(): number;
    /** True if the open batch holds events. */
    get hasOpen(): boolean;
}
