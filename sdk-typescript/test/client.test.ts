/** The client against a scripted loopback gateway: batching, seqs, retries, 413 split, refusals, queue policies. */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type DeliveryError, Headwater, type HeadwaterOptions, InvalidEventError, UndeliveredError } from "../src/index.js";
import { splitBatchId } from "../src/ids.js";
import { TestGateway } from "./gateway.js";

function client(gw: TestGateway, extra: Partial<HeadwaterOptions> = {}): Headwater {
  return new Headwater({ endpoint: gw.url, writeKey: "wk_test", nodeId: "node-1", lingerMs: 5, retryBaseMs: 10,
    retryMaxMs: 50, handleExit: false, ...extra });
}

describe("client", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await new TestGateway().start();
  });
  after(async () => {
    await gw.stop();
  });

  it("delivers every event once, in batches of at most 40, with gapless seqs from 0", async () => {
    gw.requests.length = 0;
    gw.script = () => undefined;
    const c = client(gw, { context: { app: "t" } });
    const seqs: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const r = c.track("page_view", { i }, { partitionKey: `u${i % 7}` });
      assert.ok(r.ok);
      seqs.push(r.seq);
    }
    await c.close({ timeoutMs: 10_000 });
    assert.deepEqual(seqs, [...Array(1000).keys()]);
    const events = gw.events();
    assert.equal(events.length, 1000);
    assert.deepEqual(events.map((e) => e.seq).sort((a, b) => (a as number) - (b as number)), seqs);
    assert.ok(gw.requests.every((r) => r.body.events.length <= 40));
    const first = gw.requests[0];
    assert.ok(first);
    assert.equal(first.headers["content-encoding"], "zstd");
    assert.equal(first.headers.authorization, "Bearer wk_test");
    assert.match(first.headers["user-agent"] ?? "", /^headwater-node\/0\.1\.0 \(node\/\d+\.\d+\.\d+\)$/);
    assert.deepEqual(first.body.sdk, { name: "headwater-node", version: "0.1.0" });
    assert.deepEqual(events[0]?.context, { app: "t" });
    assert.equal(events[0]?.producer_id, c.producerId);
    assert.equal(c.metrics().acknowledged, 1000);
  });

  it("retries 503 and connection resets with the same batch_id and sent_at, honouring Retry-After", async () => {
    gw.requests.length = 0;
    gw.script = (_r, n) => (n === 0 ? { status: 503, body: { code: "kafka_unavailable", message: "x" }, headers: { "retry-after": "0.3" } }
      : n === 1 ? { status: 200, reset: true } : undefined);
    const c = client(gw);
    const failures: DeliveryError[] = [];
    c.on("failure", (e) => failures.push(e));
    c.track("page_view", { a: 1 });
    const t0 = Date.now();
    assert.equal(await c.flush({ timeoutMs: 10_000 }), true);
    assert.ok(Date.now() - t0 >= 280, "waited at least Retry-After");
    assert.equal(gw.requests.length, 3);
    assert.equal(new Set(gw.requests.map((r) => r.body.batch_id)).size, 1);
    assert.equal(new Set(gw.requests.map((r) => r.body.sent_at)).size, 1);
    assert.equal(c.metrics().retries, 2);
    assert.equal(failures.length, 1); // one report per failure streak, not per attempt
    await c.close({ timeoutMs: 1000 });
  });

  it("splits a batch answered 413 into halves with derived ids, and drops a single event answered 413", async () => {
    gw.requests.length = 0;
    const big = (e: Record<string, unknown>): boolean => (e.properties as { big?: boolean }).big === true;
    gw.script = (r) => (r.body.events.length > 2 || r.body.events.some(big)
      ? { status: 413, body: { code: r.body.events.length > 1 ? "body_too_large" : "event_too_large", message: "big" } }
      : undefined);
    const c = client(gw, { lingerMs: 1000, maxInFlight: 1 });
    const refused: DeliveryError[] = [];
    c.on("failure", (e) => refused.push(e));
    for (let i = 0; i < 5; i++) c.track("page_view", { i, big: i === 4 });
    await c.close({ timeoutMs: 10_000 }).catch(() => undefined);
    const parent = gw.requests[0]?.body.batch_id as string;
    assert.equal(gw.requests[0]?.body.events.length, 5);
    assert.equal(gw.requests[1]?.body.batch_id, splitBatchId(parent, 0));
    assert.deepEqual(gw.requests[1]?.body.events.map((e) => e.seq), [0, 1]);
    assert.equal(gw.requests[2]?.body.batch_id, splitBatchId(parent, 1));
    assert.deepEqual(gw.requests[2]?.body.events.map((e) => e.seq), [2, 3, 4]);
    const m = c.metrics();
    assert.equal(m.acknowledged, 4);
    assert.equal(m.dropped.too_large, 1);
    assert.ok(refused.some((e) => e.code === "event_too_large"));
  });

  it("delivers what was tracked during an outage once the gateway is back, when close() is given the time", async () => {
    gw.requests.length = 0;
    const back = Date.now() + 1000;
    gw.script = () => (Date.now() < back ? { status: 200, reset: true } : undefined);
    const c = client(gw, { retryMaxMs: 200 });
    for (let i = 0; i < 400; i++) c.track("page_view", { i });
    await c.close({ timeoutMs: 20_000 });
    const seqs = new Set(gw.requests.flatMap((r) => r.body.events.map((e) => e.seq)));
    assert.equal(seqs.size, 400);
    assert.ok(c.metrics().retries > 0);
  });

  it("refuses a 401 without retry; close() rejects with UndeliveredError", async () => {
    gw.requests.length = 0;
    gw.script = () => ({ status: 401, body: { code: "invalid_write_key", message: "no" } });
    const c = client(gw);
    for (let i = 0; i < 3; i++) c.track("page_view", {});
    await assert.rejects(c.close({ timeoutMs: 5000 }), UndeliveredError);
    assert.equal(gw.requests.length, 1);
    assert.equal(c.metrics().dropped.refused_http_401, 3);
    await assert.rejects(c.close({ timeoutMs: 5000 }), UndeliveredError); // the second close settles the same way
    const r = c.track("page_view", {});
    assert.deepEqual(r, { ok: false, reason: "client_closed" });
  });

  it("counts per-event rejections from a 200 answer", async () => {
    gw.requests.length = 0;
    gw.script = (r) => ({ status: 200, body: { accepted: 1, rejected: [{ index: 1, code: "invalid_properties", message: "m" }] }, headers: { x: r.body.batch_id } });
    const c = client(gw);
    const reports: number[] = [];
    c.on("delivery", (d) => reports.push(d.accepted));
    c.track("page_view", {});
    c.track("page_view", {});
    assert.equal(await c.flush({ timeoutMs: 5000 }), false, "flush says that not everything flushed was accepted");
    assert.deepEqual(reports, [1]);
    assert.equal(c.metrics().rejected, 1);
    assert.equal(await c.flush({ timeoutMs: 5000 }), true, "nothing lost since the previous flush");
    await assert.rejects(c.close({ timeoutMs: 1000 }), UndeliveredError);
  });

  it("applies the queue policies: drop_newest refuses, drop_oldest evicts (counted)", async () => {
    gw.requests.length = 0;
    gw.script = () => undefined;
    const c = client(gw, { maxQueueEvents: 3, lingerMs: 10_000 });
    for (let i = 0; i < 3; i++) assert.ok(c.track("page_view", {}).ok);
    assert.deepEqual(c.track("page_view", {}), { ok: false, reason: "queue_full" });
    assert.equal(c.metrics().dropped.queue_full, 1);
    await c.close({ timeoutMs: 5000 });
    const d = client(gw, { maxQueueEvents: 3, lingerMs: 10_000, queuePolicy: "drop_oldest" });
    for (let i = 0; i < 5; i++) assert.ok(d.track("page_view", {}).ok);
    assert.equal(d.metrics().dropped.queue_full_oldest, 2);
    await assert.rejects(d.close({ timeoutMs: 5000 }), UndeliveredError);
    assert.deepEqual(gw.events().slice(3).map((e) => e.seq), [2, 3, 4]);
  });

  it("store overflow: backpressure keeps batches queued (queue policy applies); drop_oldest drops idle batches", async () => {
    gw.requests.length = 0;
    gw.script = () => ({ status: 503, body: { code: "overloaded", message: "" } });
    const opts = { maxPendingBatches: 2, maxBatchEvents: 10, maxQueueEvents: 30, maxInFlight: 1, retryDeadlineMs: 60_000 };
    const back = client(gw, opts);
    let accepted = 0;
    for (let i = 0; i < 100; i++) if (back.track("page_view", {}).ok) accepted++;
    assert.equal(accepted, 50); // 2 batches in the store + 30 queued
    assert.equal(back.metrics().dropped.queue_full, 50);
    const drop = client(gw, { ...opts, spoolOverflow: "drop_oldest" });
    for (let i = 0; i < 100; i++) assert.ok(drop.track("page_view", {}).ok);
    const m = drop.metrics();
    assert.ok((m.dropped.store_full_oldest ?? 0) >= 70, JSON.stringify(m.dropped));
    assert.equal(m.pendingBatches, 2);
    gw.script = () => undefined;
    await back.close({ timeoutMs: 20_000 }); // the refused events were never accepted: every accepted one is delivered
    assert.equal(back.metrics().acknowledged, 50);
    await assert.rejects(drop.close({ timeoutMs: 20_000 }), UndeliveredError);
  });

  it("throws InvalidEventError for bad arguments, and takes no seq for them", async () => {
    const c = client(gw);
    assert.throws(() => c.track("Bad-Type", {}), InvalidEventError);
    assert.throws(() => c.track("page_view", { x: Number.NaN }), InvalidEventError);
    assert.throws(() => c.track("page_view", {}, { eventId: "not-a-uuid" }), InvalidEventError);
    assert.throws(() => c.track("page_view", { s: "x".repeat(70_000) }), /maxEventBytes/);
    const r = c.track("page_view", {}, { eventId: "0193E0C2-6A4D-7AA0-8D55-6A3B1F0C2E11", timestamp: 1_795_313_484_990 });
    assert.deepEqual(r, { ok: true, seq: 0, eventId: "0193e0c2-6a4d-7aa0-8d55-6a3b1f0c2e11" });
    await c.close({ timeoutMs: 5000 });
  });

  it("gives up after the retry deadline without a spool (counted retry_deadline)", async () => {
    gw.requests.length = 0;
    gw.script = () => ({ status: 503, body: { code: "overloaded", message: "" } });
    const c = client(gw, { retryDeadlineMs: 200 });
    c.track("page_view", {});
    assert.equal(await c.flush({ timeoutMs: 1 }), false);
    assert.equal((c as unknown as { counters: { waiting: number } }).counters.waiting, 0, "a timed-out flush leaves no waiter");
    assert.equal(await c.flush({ timeoutMs: 5000 }), false, "settled, but dropped");
    assert.equal(c.metrics().dropped.retry_deadline, 1);
    assert.ok(gw.requests.length >= 2);
    await assert.rejects(c.close({ timeoutMs: 1000 }), UndeliveredError);
  });

  it("fills batches to maxBatchEvents before the linger timer, and keeps one connection alive", async () => {
    gw.requests.length = 0;
    gw.script = () => undefined;
    const before = gw.connections;
    const c = client(gw, { lingerMs: 60_000, maxInFlight: 1 });
    for (let i = 0; i < 120; i++) c.track("page_view", {});
    await c.close({ timeoutMs: 5000 });
    assert.deepEqual(gw.requests.map((r) => r.body.events.length), [40, 40, 40]);
    assert.equal(gw.connections - before, 1);
  });

  it("recycles its connections after connectionMaxAgeMs", async () => {
    gw.requests.length = 0;
    const before = gw.connections;
    const c = client(gw, { connectionMaxAgeMs: 1, maxInFlight: 1, maxBatchEvents: 1 });
    for (let i = 0; i < 3; i++) {
      c.track("page_view", {});
      assert.equal(await c.flush({ timeoutMs: 5000 }), true);
      await new Promise((r) => setTimeout(r, 5));
    }
    await c.close({ timeoutMs: 5000 });
    assert.equal(gw.connections - before, 3);
  });

  it("survives a listener that throws (the batch is not resent)", async () => {
    gw.requests.length = 0;
    gw.script = () => undefined;
    const c = client(gw);
    const warnings: string[] = [];
    const onWarning = (w: Error): void => {
      warnings.push(w.message);
    };
    process.on("warning", onWarning);
    c.on("delivery", () => {
      throw new Error("listener bug");
    });
    c.track("page_view", {});
    await c.close({ timeoutMs: 5000 });
    await new Promise((r) => setImmediate(r)); // warnings are emitted on a later tick
    process.off("warning", onWarning);
    assert.equal(gw.requests.length, 1);
    assert.ok(warnings.some((w) => w.includes("listener bug")));
  });

  it("sends up to maxInFlight batches at once", async () => {
    gw.requests.length = 0;
    let open = 0;
    let peak = 0;
    const slow = new TestGateway();
    await slow.start();
    slow.script = () => undefined;
    const c = client(slow, { maxInFlight: 3 });
    const origSend = (c as unknown as { transport: { send: (...a: unknown[]) => Promise<unknown> } }).transport;
    const send = origSend.send.bind(origSend);
    origSend.send = async (...a: unknown[]) => {
      open++;
      peak = Math.max(peak, open);
      await new Promise((r) => setTimeout(r, 50));
      try {
        return await send(...a);
      } finally {
        open--;
      }
    };
    for (let i = 0; i < 400; i++) c.track("page_view", {});
    await c.close({ timeoutMs: 10_000 });
    assert.equal(peak, 3);
    assert.equal(slow.events().length, 400);
    await slow.stop();
  });
});
