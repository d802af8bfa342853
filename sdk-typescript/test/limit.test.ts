/** The adaptive in-flight limit (protocol.md §6.2) and the gate's wake-up rule (§6.1), as pure rules and in a client. */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { TransportError } from "../src/errors.js";
import { Gate } from "../src/gate.js";
import { AdaptiveLimit, INITIAL_LIMIT, Window } from "../src/limit.js";
import { Headwater } from "../src/index.js";
import { TestGateway } from "./gateway.js";

function grow(l: AdaptiveLimit, answers: number, rttMs = 50, limited = true, nowMs = 0): void {
  for (let i = 0; i < answers; i++) l.succeeded(rttMs, limited, nowMs);
}

function until(cond: () => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const check = (): void => {
      if (cond()) resolve();
      else if (Date.now() > deadline) reject(new Error("timed out"));
      else setTimeout(check, 5);
    };
    check();
  });
}

describe("adaptive limit", () => {
  it("starts at four and doubles per round trip up to the ceiling, only when the window was full", () => {
    const l = new AdaptiveLimit(16);
    assert.equal(l.window, INITIAL_LIMIT);
    assert.equal(INITIAL_LIMIT, 4);
    grow(l, 4);
    assert.equal(l.window, 8);
    grow(l, 100);
    assert.equal(l.window, 16);
    assert.equal(new AdaptiveLimit(2).window, 2);
    const quiet = new AdaptiveLimit(16);
    grow(quiet, 1000, 50, false);
    assert.equal(quiet.window, 4);
  });

  it("halves once per generation on failures and doubles back to half the window before the outage", () => {
    const l = new AdaptiveLimit(16);
    grow(l, 12);
    const sentIn = l.generation;
    for (let i = 0; i < 16; i++) l.failed(sentIn);
    assert.equal(l.window, 8);
    for (let i = 0; i < 3; i++) l.failed(l.generation);
    assert.equal(l.window, 1);
    grow(l, 1 + 2 + 4);
    assert.equal(l.window, 8);
    grow(l, 8);
    assert.ok(l.limit > 8.9 && l.limit < 9.1);
  });

  it("shrinks when round trips grow and forgets old minima", () => {
    const l = new AdaptiveLimit(64);
    grow(l, 50, 1);
    grow(l, 3000, 10);
    assert.ok(l.window <= 5, `window ${l.window}`);
    const f = new AdaptiveLimit(16);
    f.succeeded(1, false, 0);
    grow(f, 10, 50, false, 15_000);
    assert.equal(f.minRttMs, 1);
    grow(f, 10, 50, false, 25_000);
    assert.equal(f.minRttMs, 50);
  });

  it("hands out places and records the peak", async () => {
    const w = new Window(16);
    const slots = await Promise.all([w.acquire(), w.acquire(), w.acquire(), w.acquire()]);
    assert.deepEqual(slots.map((s) => s?.limited), [false, false, false, true]);
    let fifth = false;
    const waiting = w.acquire().then((s) => { fifth = s !== undefined; });
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(fifth, false);
    w.release(slots[0] as NonNullable<(typeof slots)[0]>, "neutral");
    await waiting;
    assert.equal(fifth, true);
    assert.equal(w.peak, 4);
    const sixth = w.acquire();
    w.stop();
    assert.equal(await sixth, undefined);
  });
});

describe("gate", () => {
  it("an answer and close() end every backoff; close caps later ones", async () => {
    const abort = new AbortController();
    const g = new Gate(2000, abort.signal, () => {});
    const me = g.newId();
    const since = g.failed(me, new TransportError("down"));
    const ended: number[] = [];
    const sleepers = [0, 1, 2].map(() => g.backoff(600_000, since).then(() => ended.push(Date.now())));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(ended.length, 0);
    const woke = Date.now();
    g.answered();
    await Promise.all(sleepers);
    assert.ok(Math.max(...ended) - woke < 1000);
    const again = g.backoff(600_000, g.failed(me, new TransportError("down again")));
    g.wake(true);
    assert.equal(await again, true);
    assert.equal(g.capped(30_000), 2000);
    abort.abort();
  });

  it("lets only the prober through during a streak", async () => {
    const abort = new AbortController();
    const g = new Gate(2000, abort.signal, () => {});
    const prober = g.newId();
    const other = g.newId();
    g.failed(prober, new TransportError("down"));
    assert.equal(await g.enter(prober), true);
    let passed: boolean | undefined;
    const waiting = g.enter(other).then((v) => { passed = v; });
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(passed, undefined);
    g.gaveUp(prober);
    await waiting;
    assert.equal(passed, true);
    abort.abort();
    assert.equal(await g.enter(other), false);
  });
});

describe("wake-up in a client", () => {
  let gw: TestGateway;
  before(async () => {
    gw = await new TestGateway().start();
  });
  after(async () => {
    await gw.stop();
  });

  it("an answer to another batch wakes a batch in a long backoff", async () => {
    gw.requests.length = 0;
    let release: () => void = () => {};
    const released = new Promise<void>((r) => { release = r; });
    let arrivedAll: () => void = () => {};
    const allArrived = new Promise<void>((r) => { arrivedAll = r; });
    const times: number[] = [];
    gw.script = (_r, n) => {
      times.push(Date.now());
      if (n === 3) arrivedAll();
      if (n === 0) return { status: 503, body: { code: "overloaded", message: "x" }, after: allArrived };
      return n < 4 ? { status: 200, body: { accepted: 1, rejected: [] }, after: released } : undefined;
    };
    const c = new Headwater({ endpoint: gw.url, writeKey: "k", handleExit: false, maxBatchEvents: 1, lingerMs: 1,
      retryBaseMs: 60_000, retryMaxMs: 60_000 });
    for (let i = 0; i < 4; i++) c.track("page_view", { i });
    await until(() => c.metrics().retries >= 1);
    const woke = Date.now();
    release();
    assert.equal(await c.flush({ timeoutMs: 5000 }), true);
    const firstId = gw.requests[0]?.body.batch_id;
    const retry = gw.requests.findIndex((r, i) => i > 0 && r.body.batch_id === firstId);
    assert.ok(retry > 0);
    assert.ok((times[retry] as number) - woke < 1000, `retried ${(times[retry] as number) - woke} ms after the answers`);
    await c.close({ timeoutMs: 5000 });
  });

  it("close() delivers what waited in a long backoff", async () => {
    gw.requests.length = 0;
    gw.script = (_r, n) => (n === 0 ? { status: 503, body: { code: "overloaded", message: "x" } } : undefined);
    const c = new Headwater({ endpoint: gw.url, writeKey: "k", handleExit: false, lingerMs: 1,
      retryBaseMs: 180_000, retryMaxMs: 180_000 });
    c.track("page_view", {});
    await until(() => c.metrics().retries >= 1);
    const start = Date.now();
    await c.close({ timeoutMs: 5000 });
    assert.ok(Date.now() - start < 3000);
  });
});

describe("default reporting", () => {
  it("warns each code at once, then at most every 10 s with the count since the previous warning", async () => {
    const { Reporter } = await import("../src/report.js");
    const { EventRejectedError, BatchRejectedError } = await import("../src/errors.js");
    const warned: string[] = [];
    let now = 0;
    const r = new Reporter((m) => warned.push(m), 10_000, () => now);
    for (let i = 0; i < 5; i++) r.report(new EventRejectedError("b", "e", i, "invalid_properties", "m"));
    r.report(new BatchRejectedError("b2", 401, "invalid_write_key", "m", 40)); // a second code is seen at once
    assert.equal(warned.length, 2);
    now = 10_001;
    r.report(new EventRejectedError("b", "e", 9, "invalid_properties", "m"));
    assert.equal(warned.length, 3);
    assert.match(warned[2] as string, /and 4 more event\(s\)/);
    r.report(new BatchRejectedError("b3", 401, "invalid_write_key", "m", 40));
    r.report(new BatchRejectedError("b4", 401, "invalid_write_key", "m", 40));
    r.close();
    assert.match(warned[warned.length - 1] as string, /40 more event\(s\)/); // b3 was warned at once, b4 counted
  });
});

describe("MemoryTransport", () => {
  it("records what a client sends and answers as a gateway would", async () => {
    const { MemoryTransport } = await import("../src/index.js");
    const fake = new MemoryTransport();
    const c = new Headwater({ endpoint: "http://gateway.test", writeKey: "k", transport: fake, handleExit: false });
    c.track("server_metric", { host: "h", service: "s", metric: "m", kind: "counter", value: 1, unit: "1" });
    await c.close({ timeoutMs: 5000 });
    assert.equal(fake.requests.length, 1);
    assert.equal(fake.requests[0]?.url, "http://gateway.test/v1/batch");
    assert.equal(fake.closed, true);
  });
});
