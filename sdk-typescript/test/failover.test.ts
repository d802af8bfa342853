/** Several endpoints (protocol.md §9): the failover core on a fake clock, and the client failing over and back. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decompress } from "zstd-napi";
import { buildConfig, optionsFromEnv } from "../src/config.js";
import { ConfigError, TransportError } from "../src/errors.js";
import { Endpoints } from "../src/failover.js";
import { Headwater, type HttpRequest, type HttpResponse, MemoryTransport } from "../src/index.js";

class Clock {
  t = 100_000;
  now = (): number => this.t;
}

describe("failover core", () => {
  it("fails over only after both the count and the time, ignoring stale failures", () => {
    const clock = new Clock();
    const e = new Endpoints(["http://a", "http://b/", "http://c"], 3, 10_000, 5_000, clock.now);
    for (let i = 0; i < 3; i++) assert.equal(e.failed(0), undefined);
    clock.t += 9_900;
    assert.equal(e.failed(0), undefined);
    clock.t += 100;
    const sw = e.failed(0);
    assert.deepEqual(sw, { old: "http://a", new: "http://b", failback: false, failures: 5, spentMs: 10_000 });
    assert.deepEqual(e.current(), [1, "http://b"]);
    for (let i = 0; i < 5; i++) assert.equal(e.failed(0), undefined); // requests still in flight to the old one
    e.answered(1);
    assert.equal(e.failed(1), undefined);
    assert.equal(e.failed(1), undefined);
    clock.t += 10_000;
    assert.equal(e.failed(1)?.new, "http://c");
    e.failed(2);
    e.failed(2);
    clock.t += 10_000;
    assert.equal(e.failed(2)?.new, "http://a"); // after the last: the first again
    assert.equal(e.failovers, 3);
  });

  it("probes one at a time when due and fails back to the first ready endpoint", () => {
    const clock = new Clock();
    const e = new Endpoints(["http://a", "http://b", "http://c"], 1, 0, 5_000, clock.now);
    assert.deepEqual(e.probeTargets(), []);
    e.failed(0);
    e.failed(1);
    assert.deepEqual(e.probeTargets(), []);
    clock.t += 5_000;
    assert.deepEqual(e.probeTargets(), [0, 1]);
    assert.deepEqual(e.probeTargets(), []);
    assert.equal(e.probed(undefined), undefined);
    clock.t += 5_000;
    e.probeTargets();
    assert.equal(e.probed(1)?.new, "http://b");
    clock.t += 5_000;
    assert.deepEqual(e.probeTargets(), [0]);
    assert.equal(e.probed(0)?.failback, true);
    assert.deepEqual(e.current(), [0, "http://a"]);
    assert.equal(e.failbacks, 2);
  });

  it("takes endpoints from options or the environment, and refuses bad lists", () => {
    const cfg = buildConfig({ endpoints: ["http://a", "http://b"], writeKey: "k" });
    assert.equal(cfg.endpoint, "http://a");
    assert.deepEqual(cfg.endpoints, ["http://a", "http://b"]);
    assert.deepEqual(buildConfig({ endpoint: "http://a", writeKey: "k" }).endpoints, ["http://a"]);
    const env = buildConfig(optionsFromEnv({ HEADWATER_ENDPOINTS: "http://a, http://b", HEADWATER_WRITE_KEY: "k",
      HEADWATER_FAILOVER_AFTER_S: "2.5", HEADWATER_FAILBACK_PROBE_S: "30" }));
    assert.deepEqual(env.endpoints, ["http://a", "http://b"]);
    assert.equal(env.failoverAfterMs, 2_500);
    assert.equal(env.failbackProbeMs, 30_000);
    for (const bad of [
      { endpoint: "http://x", endpoints: ["http://a", "http://b"] },
      { endpoints: ["http://a", "http://a/"] },
      { endpoints: ["http://a", "https://b"] },
      { endpoints: [] },
      {},
      { endpoint: "http://a", failoverAfterFailures: 0 },
    ]) {
      assert.throws(() => buildConfig({ writeKey: "k", ...bad }), ConfigError, JSON.stringify(bad));
    }
  });
});

type Mode = "down" | "503" | "up";

/** `http://a` answers as `primary.mode` says (with /readyz); `http://b` accepts everything. */
function regions(primary: { mode: Mode }): MemoryTransport {
  return new MemoryTransport((req: HttpRequest): HttpResponse | Promise<HttpResponse> => {
    const onA = req.url.startsWith("http://a");
    if (onA && primary.mode === "down") return Promise.reject(new TransportError("refused", "connection_refused"));
    if (req.url.endsWith("/readyz")) return { status: onA && primary.mode !== "up" ? 503 : 200, headers: {}, body: Buffer.alloc(0) };
    if (onA && primary.mode === "503") {
      return { status: 503, headers: { "retry-after": "1" }, body: Buffer.from('{"code":"kafka_unavailable","message":"down"}') };
    }
    const n = bodyOf(req).events.length;
    return { status: 200, headers: {}, body: Buffer.from(`{"accepted":${n},"rejected":[]}`) };
  });
}

interface Body { batch_id: string; events: Array<{ seq: number; properties: Record<string, unknown> }> }

function bodyOf(req: HttpRequest): Body {
  return JSON.parse(decompress(req.body).toString("utf8")) as Body;
}

function client(transport: MemoryTransport, failbackProbeMs = 3_600_000): Headwater {
  return new Headwater({ endpoints: ["http://a", "http://b"], writeKey: "k", transport, handleExit: false, lingerMs: 5,
    retryBaseMs: 5, retryMaxMs: 20, failoverAfterMs: 50, failoverAfterFailures: 3, failbackProbeMs });
}

describe("client failover", () => {
  for (const mode of ["down", "503"] as const) {
    it(`fails over (${mode}) keeping batch ids, events and seqs`, async () => {
      const t = regions({ mode });
      const c = client(t);
      const seqs: number[] = [];
      for (let i = 0; i < 100; i++) {
        const r = c.track("page_view", { i });
        assert.ok(r.ok);
        seqs.push(r.seq);
      }
      assert.ok(await c.flush({ timeoutMs: 10_000 }));
      const m = c.metrics();
      await c.close({ timeoutMs: 1_000 });
      assert.deepEqual(seqs, [...Array(100).keys()]);
      assert.equal(m.acknowledged, 100);
      assert.equal(m.failovers, 1);
      assert.equal(m.endpoint, "http://b");
      const posts = t.requests.filter((r) => r.url.endsWith("/v1/batch"));
      const onB = posts.filter((r) => r.url.startsWith("http://b")).map(bodyOf);
      assert.deepEqual(onB.flatMap((b) => b.events.map((e) => e.seq)).sort((x, y) => x - y), seqs); // each once
      const byId = new Map(onB.map((b) => [b.batch_id, b]));
      const onA = posts.filter((r) => r.url.startsWith("http://a")).map(bodyOf);
      if (mode === "503") assert.ok(onA.length >= 3);
      for (const b of onA) assert.deepEqual(byId.get(b.batch_id)?.events, b.events); // the same batch, resent
    });
  }

  it("fails back to the primary after a ready probe", async () => {
    const primary: { mode: Mode } = { mode: "503" };
    const t = regions(primary);
    const c = client(t, 50);
    for (let i = 0; i < 10; i++) c.track("page_view", { i });
    assert.ok(await c.flush({ timeoutMs: 10_000 }));
    assert.equal(c.metrics().endpoint, "http://b");
    primary.mode = "up";
    const deadline = Date.now() + 10_000;
    while (c.metrics().endpoint !== "http://a") { // each flush sends a batch; a due probe moves the client back
      assert.ok(Date.now() < deadline, "no failback within 10 s");
      c.track("page_view", {});
      assert.ok(await c.flush({ timeoutMs: 10_000 }));
    }
    c.track("page_view", { last: true });
    assert.ok(await c.flush({ timeoutMs: 10_000 }));
    const m = c.metrics();
    await c.close({ timeoutMs: 1_000 });
    assert.equal(m.failbacks, 1);
    assert.equal(m.acknowledged, m.enqueued);
    const posts = t.requests.filter((r) => r.url.endsWith("/v1/batch"));
    const last = posts[posts.length - 1];
    assert.equal(last?.url, "http://a/v1/batch");
    assert.deepEqual(last && bodyOf(last).events.at(-1)?.properties, { last: true });
    const probes = t.requests.filter((r) => r.url.endsWith("/readyz"));
    assert.ok(probes.length > 0 && probes.every((r) => r.headers.Authorization === undefined));
  });
});
