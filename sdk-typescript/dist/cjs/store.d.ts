/**
 * Pending batches between sealing and acknowledgement: the ordered store over a backing (memory or disk).
 *
 * Modelled on the OpenTelemetry Collector's persistent queue: batches are appended in seq order, become
 * ready once persisted, are handed to the sender (in flight until acked), acked (deleted) after a 200 or a
 * permanent refusal, released back after a retry deadline, or replaced in place by their halves after a 413.
 * Several batches may be in flight at once (`maxInFlight`). Where a batch's bytes live is the `Backing`'s
 * business: `MemoryBacking` keeps them in memory (lost with the process), `DiskSpool` (spool.ts) in files.
 */
import type { Batch } from "./wire.js";
/** (reason, event count, detail) of events a store dropped. */
export type DropReporter = (reason: string, count: number, detail: string) => void;
/** One pending batch: its seq range and size, and the batch itself and/or the file holding it. */
export interface Entry {
    batchId: string;
    firstSeq: number;
    lastSeq: number;
    count: number;
    nbytes: number;
    batch: Batch | undefined;
    path: string | undefined;
    state: "persisting" | "ready" | "inflight";
}
/** Where a store's batches live: memory, or files for a spool. */
export interface Backing {
    /**
     * Keep `batch` (described by `entry`), now or later; then call `kept`, which returns false when the store no
     * longer holds the entry (acked or dropped meanwhile): the backing then deletes what it wrote.
     */
    persist(entry: Entry, batch: Batch, kept: () => boolean): void;
    /** The batch of `entry`; undefined if it is unusable (the backing set it aside; the store drops it). */
    load(entry: Entry): Batch | undefined;
    /** Delete what holds `entry`; `after`: entries (a split's halves) that must be kept before it goes. */
    remove(entry: Entry, after: readonly Entry[]): void;
}
/** Batches kept in memory only: lost with the process. */
export declare class MemoryBacking implements Backing {
    persist(_entry: Entry, _batch: Batch, kept: () => boolean): void;
    load(entry: Entry): Batch | undefined;
    remove(_entry: Entry, _after: readonly Entry[]): void;
}
/** Pending batches in seq order, bounded, with an overflow policy, over a backing that holds their bytes. */
export declare class Store {
    private readonly backing;
    private readonly maxBatches;
    private readonly maxBytes;
    private readonly overflow;
    private readonly report;
    private readonly entries;
    private bytes;
    private events;
    /** Called when a batch becomes ready to send (the dispatcher pumps). */
    onReady: () => void;
    /** `recovered`: entries the backing found at start (a spool's files), queued first in the order given. */
    constructor(backing: Backing, maxBatches: number, maxBytes: number, overflow: "backpressure" | "drop_oldest", report: DropReporter, recovered?: readonly Entry[]);
    /** True if a batch of `size` bytes would not fit now and the policy is to push back. */
    full(size: number): boolean;
    /** Keep `batch`; under `drop_oldest`, idle batches are dropped (and reported) until it fits. */
    append(batch: Batch): void;
    /** The oldest ready batch, now in flight; undefined if none. */
    take(): Batch | undefined;
    /** Forget the in-flight `batch`: delivered or permanently refused. */
    ack(batch: Batch): void;
    /** Give the in-flight `batch` back: it will be sent again. */
    release(batch: Batch): void;
    /** Replace the in-flight `batch` by `parts` (the halves of a split), at its place in line. */
    replace(batch: Batch, parts: readonly Batch[]): void;
    /** (pending batches, pending events, bytes held). */
    stats(): [number, number, number];
    /** Pending events whose batch is in a file (survives kill -9); 0 in memory. */
    durableEvents(): number;
    /** Pending batches that are not in flight. */
    idleCount(): number;
    private persist;
    private newEntry;
    private add;
    private discard;
    private drop;
    private oldestIdle;
    private find;
}
