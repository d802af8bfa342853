/**
 * Pending batches between sealing and acknowledgement: the ordered store over a backing (memory or disk).
 *
 * Modelled on the OpenTelemetry Collector's persistent queue: batches are appended in seq order, become
 * ready once persisted, are handed to the sender (in flight until acked), acked (deleted) after a 200 or a
 * permanent refusal, released back after a retry deadline, or replaced in place by their halves after a 413.
 * Several batches may be in flight at once (`maxInFlight`). Where a batch's bytes live is the `Backing`'s
 * business: `MemoryBacking` keeps them in memory (lost with the process), `DiskSpool` (spool.ts) in files.
 */
/** Batches kept in memory only: lost with the process. */
export class MemoryBacking {
    persist(_entry, _batch, kept) {
        kept();
    }
    load(entry) {
        return entry.batch;
    }
    remove(_entry, _after) { }
}
/** Pending batches in seq order, bounded, with an overflow policy, over a backing that holds their bytes. */
export class Store {
    backing;
    maxBatches;
    maxBytes;
    overflow;
    report;
    entries = [];
    bytes = 0;
    events = 0;
    /** Called when a batch becomes ready to send (the dispatcher pumps). */
    onReady = () => { };
    /** `recovered`: entries the backing found at start (a spool's files), queued first in the order given. */
    constructor(backing, maxBatches, maxBytes, overflow, report, recovered = []) {
        this.backing = backing;
        this.maxBatches = maxBatches;
        this.maxBytes = maxBytes;
        this.overflow = overflow;
        this.report = report;
        for (const entry of recovered)
            this.add(entry, this.entries.length);
    }
    /** True if a batch of `size` bytes would not fit now and the policy is to push back. */
    full(size) {
        if (this.entries.length === 0)
            return false;
        const over = this.entries.length >= this.maxBatches || this.bytes + size > this.maxBytes;
        if (!over || this.overflow === "backpressure")
            return over;
        return this.oldestIdle() === undefined;
    }
    /** Keep `batch`; under `drop_oldest`, idle batches are dropped (and reported) until it fits. */
    append(batch) {
        while (this.entries.length > 0 && (this.entries.length >= this.maxBatches || this.bytes + batch.nbytes > this.maxBytes)) {
            const victim = this.oldestIdle();
            if (victim === undefined)
                break;
            this.drop(victim, "store_full_oldest");
        }
        const entry = this.newEntry(batch);
        this.add(entry, this.entries.length);
        this.persist(entry, batch);
    }
    /** The oldest ready batch, now in flight; undefined if none. */
    take() {
        for (const entry of this.entries) {
            if (entry.state !== "ready")
                continue;
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
    ack(batch) {
        const entry = this.find(batch);
        if (entry !== undefined)
            this.discard(entry);
    }
    /** Give the in-flight `batch` back: it will be sent again. */
    release(batch) {
        const entry = this.find(batch);
        if (entry !== undefined)
            entry.state = "ready";
    }
    /** Replace the in-flight `batch` by `parts` (the halves of a split), at its place in line. */
    replace(batch, parts) {
        const entry = this.find(batch);
        if (entry === undefined)
            return;
        let at = this.entries.indexOf(entry);
        const newEntries = parts.map((p) => this.newEntry(p));
        for (const e of newEntries)
            this.add(e, ++at);
        for (let i = 0; i < parts.length; i++)
            this.persist(newEntries[i], parts[i]);
        this.discard(entry, newEntries); // after persist(): a spool unlinks the parent once the halves are on disk
    }
    /** (pending batches, pending events, bytes held). */
    stats() {
        return [this.entries.length, this.events, this.bytes];
    }
    /** Pending events whose batch is in a file (survives kill -9); 0 in memory. */
    durableEvents() {
        let n = 0;
        for (const e of this.entries)
            if (e.path !== undefined)
                n += e.count;
        return n;
    }
    /** Pending batches that are not in flight. */
    idleCount() {
        return this.entries.filter((e) => e.state !== "inflight").length;
    }
    persist(entry, batch) {
        this.backing.persist(entry, batch, () => {
            if (!this.entries.includes(entry))
                return false;
            if (entry.state === "persisting")
                entry.state = "ready";
            this.onReady();
            return true;
        });
    }
    newEntry(batch) {
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
    add(entry, at) {
        this.entries.splice(at, 0, entry);
        this.bytes += entry.nbytes;
        this.events += entry.count;
    }
    discard(entry, after = []) {
        const at = this.entries.indexOf(entry);
        if (at < 0)
            return;
        this.entries.splice(at, 1);
        this.bytes -= entry.nbytes;
        this.events -= entry.count;
        this.backing.remove(entry, after);
    }
    drop(entry, reason) {
        this.discard(entry);
        this.report(reason, entry.count, `batch ${entry.batchId}, seq ${entry.firstSeq}..${entry.lastSeq}`);
    }
    oldestIdle() {
        return this.entries.find((e) => e.state === "ready");
    }
    find(batch) {
        return this.entries.find((e) => e.state === "inflight" && e.batchId === batch.batchId);
    }
}
