/**
 * Pending batches between sealing and acknowledgement: the ordered in-memory store the disk spool extends.
 *
 * Modelled on the OpenTelemetry Collector's persistent queue: batches are appended in seq order, become
 * ready once persisted, are handed to the sender (in flight until acked), acked (deleted) after a 200 or a
 * permanent refusal, released back after a retry deadline, or replaced in place by their halves after a 413.
 * Several batches may be in flight at once (`maxInFlight`).
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
/** Pending batches in seq order, bounded, with an overflow policy; subclasses decide where bytes live. */
export declare class MemoryStore {
    protected readonly maxBatches: number;
    protected readonly maxBytes: number;
    protected readonly overflow: "backpressure" | "drop_oldest";
    protected readonly report: DropReporter;
    producerId: string;
    protected readonly entries: Entry[];
    protected bytes: number;
    protected events: number;
    /** Called when a batch becomes ready to send (the dispatcher pumps). */
    onReady: () => void;
    constructor(producerId: string, maxBatches: number, maxBytes: number, overflow: "backpressure" | "drop_oldest", report: DropReporter);
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
    /** Release resources; a spool keeps its files for the next client. */
    close(_nextSeq: number): void;
    protected persist(entry: Entry, _batch: Batch): void;
    protected load(entry: Entry): Batch | undefined;
    protected remove(_entry: Entry, _after: Entry[]): void;
    protected newEntry(batch: Batch): Entry;
    protected add(entry: Entry, at: number): void;
    protected discard(entry: Entry, after?: Entry[]): void;
    protected drop(entry: Entry, reason: string): void;
    private oldestIdle;
    private find;
}
