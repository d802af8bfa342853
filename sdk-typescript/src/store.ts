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
export class MemoryBacking implements Backing {
  persist(_entry: Entry, _batch: Batch, kept: () => boolean): void {
    kept();
  }

  load(entry: Entry): Batch | undefined {
    return entry.batch;
  }

  remove(_entry: Entry, _after: readonly Entry[]): void {}
}

/** Pending batches in seq order, bounded, with an overflow policy, over a backing that holds their bytes. */
export class Store {
  private readonly entries: Entry[] = [];
  private bytes = 0;
  private events = 0;
  /** Called when a batch becomes ready to send (the dispatcher pumps). */
  onReady: () => void = () => {};

  /** `recovered`: entries the backing found at start (a spool's files), queued first in the order given. */
  constructor(
    private readonly backing: Backing,
    private readonly maxBatches: number,
    private readonly maxBytes: number,
    private readonly overflow: "backpressure" | "drop_oldest",
    private readonly report: DropReporter,
    recovered: readonly Entry[] = [],
  ) {
    for (const entry of recovered) this.add(entry, this.entries.length);
  }

  /** True if a batch of `size` bytes would not fit now and the policy is to push back. */
  full(size: number): boolean {
    if (this.entries.length === 0) return false;
    const over = this.entries.length >= this.maxBatches || this.bytes + size > this.maxBytes;
    if (!over || this.overflow === "backpressure") return over;
    return this.oldestIdle() === undefined;
  }

  /** Keep `batch`; under `drop_oldest`, idle batches are dropped (and reported) until it fits. */
  append(batch: Batch): void {
    while (this.entries.length > 0 && (this.entries.length >= this.maxBatches || this.bytes + batch.nbytes > this.maxBytes)) {
      const victim = this.oldestIdle();
      if (victim === undefined) break;
      this.drop(victim, "store_full_oldest");
    }
    const entry = this.newEntry(batch);
    this.add(entry, this.entries.length);
    this.persist(entry, batch);
  }

  /** The oldest ready batch, now in flight; undefined if none. */
  take(): Batch | undefined {
    for (const entry of this.entries) {
      if (entry.state !== "ready") continue;
      const batch = this.backing.load(entry);
      if (batch === undefined) {
        this.drop(entry, "spool_corrupt"); // the backing set it aside
        return this.take();
      }
      entry.state = "inflight";
      return batch;
    }
    return undefined;
  }

  /** Forget the in-flight `batch`: delivered or permanently refused. */
  ack(batch: Batch): void {
    const entry = this.find(batch);
    if (entry !== undefined) this.discard(entry);
  }

  /** Give the in-flight `batch` back: it will be sent again. */
  release(batch: Batch): void {
    const entry = this.find(batch);
    if (entry !== undefined) entry.state = "ready";
  }

  /** Replace the in-flight `batch` by `parts` (the halves of a split), at its place in line. */
  replace(batch: Batch, parts: readonly Batch[]): void {
    const entry = this.find(batch);
    if (entry === undefined) return;
    let at = this.entries.indexOf(entry);
    const newEntries = parts.map((p) => this.newEntry(p));
    for (const e of newEntries) this.add(e, ++at);
    for (let i = 0; i < parts.length; i++) this.persist(newEntries[i] as Entry, parts[i] as Batch);
    this.discard(entry, newEntries); // after persist(): a spool unlinks the parent once the halves are on disk
  }

  /** (pending batches, pending events, bytes held). */
  stats(): [number, number, number] {
    return [this.entries.length, this.events, this.bytes];
  }

  /** Pending events whose batch is in a file (survives kill -9); 0 in memory. */
  durableEvents(): number {
    let n = 0;
    for (const e of this.entries) if (e.path !== undefined) n += e.count;
    return n;
  }

  /** Pending batches that are not in flight. */
  idleCount(): number {
    return this.entries.filter((e) => e.state !== "inflight").length;
  }

  private persist(entry: Entry, batch: Batch): void {
    this.backing.persist(entry, batch, () => {
      if (!this.entries.includes(entry)) return false;
      if (entry.state === "persisting") entry.state = "ready";
      this.onReady();
      return true;
    });
  }

  private newEntry(batch: Batch): Entry {
    return {
      batchId: batch.batchId,
      firstSeq: batch.firstSeq,
      lastSeq: batch.lastSeq,
      count: batch.events.length,
      nbytes: batch.nbytes,
      batch,
      path: undefined,
      state: "persisting",
    };
  }

  private add(entry: Entry, at: number): void {
    this.entries.splice(at, 0, entry);
    this.bytes += entry.nbytes;
    this.events += entry.count;
  }

  private discard(entry: Entry, after: Entry[] = []): void {
    const at = this.entries.indexOf(entry);
    if (at < 0) return;
    this.entries.splice(at, 1);
    this.bytes -= entry.nbytes;
    this.events -= entry.count;
    this.backing.remove(entry, after);
  }

  private drop(entry: Entry, reason: string): void {
    this.discard(entry);
    this.report(reason, entry.count, `batch ${entry.batchId}, seq ${entry.firstSeq}..${entry.lastSeq}`);
  }

  private oldestIdle(): Entry | undefined {
    return this.entries.find((e) => e.state === "ready");
  }

  private find(batch: Batch): Entry | undefined {
    return this.entries.find((e) => e.state === "inflight" && e.batchId === batch.batchId);
  }
}
