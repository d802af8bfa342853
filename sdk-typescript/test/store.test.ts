/** The ordered store over a fake backing: order, in flight, splits, bounds, batches the backing cannot load. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Backing, type Entry, MemoryBacking, Store } from "../src/store.js";
import type { Batch } from "../src/wire.js";

/** Records what the store asks of it; `unusable` batch ids load as undefined (as a corrupt spool file does). */
class FakeBacking implements Backing {
  readonly persisted: string[] = [];
  readonly removed: string[] = [];
  readonly unusable = new Set<string>();
  /** Persists that have not called back yet (`later`: the store hears of them when `finish()` runs). */
  private readonly pending: (() => boolean)[] = [];
  later = false;

  persist(entry: Entry, _batch: Batch, kept: () => boolean): void {
    this.persisted.push(entry.batchId);
    if (this.later) this.pending.push(kept);
    else kept();
  }

  load(entry: Entry): Batch | undefined {
    return this.unusable.has(entry.batchId) ? undefined : entry.batch;
  }

  remove(entry: Entry, _after: readonly Entry[]): void {
    this.removed.push(entry.batchId);
  }

  finish(): boolean[] {
    return this.pending.splice(0).map((kept) => kept());
  }
}

function batch(batchId: string, first: number, n = 2): Batch {
  const events = Array.from({ length: n }, (_, i) => `{"seq":${first + i}}`);
  return { batchId, producerId: "p", firstSeq: first, lastSeq: first + n - 1, events, nbytes: 10 * n };
}

function store(back: Backing, drops: [string, number][], maxBatches = 100,
               overflow: "backpressure" | "drop_oldest" = "backpressure"): Store {
  return new Store(back, maxBatches, 2 ** 40, overflow, (reason, n) => drops.push([reason, n]));
}

describe("store", () => {
  it("hands out the oldest ready batch; a released batch keeps its place; ack removes it", () => {
    const back = new FakeBacking();
    const s = store(back, []);
    s.append(batch("a", 0));
    s.append(batch("b", 2));
    const first = s.take();
    assert.equal(first?.batchId, "a");
    assert.equal(s.take()?.batchId, "b");
    assert.equal(s.take(), undefined); // both in flight
    s.release(first);
    const again = s.take();
    assert.equal(again?.batchId, "a");
    s.ack(again);
    assert.deepEqual(back.removed, ["a"]);
    assert.deepEqual(s.stats(), [1, 2, 20]);
  });

  it("puts a split's halves where the parent was", () => {
    const back = new FakeBacking();
    const s = store(back, []);
    s.append(batch("a", 0, 4));
    s.append(batch("b", 4));
    s.replace(s.take() as Batch, [batch("a0", 0), batch("a1", 2)]);
    const order: string[] = [];
    for (let b = s.take(); b !== undefined; b = s.take()) order.push(b.batchId);
    assert.deepEqual(order, ["a0", "a1", "b"]);
    assert.deepEqual(back.removed, ["a"]);
  });

  it("drops a batch the backing cannot load as spool_corrupt", () => {
    const back = new FakeBacking();
    const drops: [string, number][] = [];
    const s = store(back, drops);
    s.append(batch("a", 0, 3));
    s.append(batch("b", 3));
    back.unusable.add("a");
    assert.equal(s.take()?.batchId, "b");
    assert.deepEqual(drops, [["spool_corrupt", 3]]);
    assert.equal(s.stats()[0], 1);
  });

  it("under drop_oldest makes room from the oldest idle batch", () => {
    const back = new FakeBacking();
    const drops: [string, number][] = [];
    const s = store(back, drops, 2, "drop_oldest");
    ["a", "b", "c"].forEach((id, i) => s.append(batch(id, 2 * i)));
    assert.deepEqual(drops, [["store_full_oldest", 2]]);
    assert.deepEqual(back.removed, ["a"]);
    assert.equal(s.take()?.batchId, "b");
  });

  it("sends a batch only once its backing kept it", () => {
    const back = new FakeBacking();
    back.later = true;
    const s = store(back, []);
    let ready = 0;
    s.onReady = () => ready++;
    s.append(batch("a", 0));
    assert.equal(s.take(), undefined); // still being written
    assert.deepEqual(back.finish(), [true]);
    assert.equal(ready, 1);
    assert.equal(s.take()?.batchId, "a");
  });

  it("queues recovered entries first", () => {
    const old: Entry = { batchId: "old", firstSeq: 0, lastSeq: 1, count: 2, nbytes: 20, batch: batch("old", 0),
      path: undefined, state: "ready" };
    const back = new MemoryBacking();
    const s = new Store(back, 100, 2 ** 40, "backpressure", () => {}, [old]);
    s.append(batch("new", 2));
    assert.equal(s.take()?.batchId, "old");
    assert.deepEqual(s.stats(), [2, 4, 40]);
  });
});
