/** The disk spool: resend after close and after kill -9, seqs never reused, the directory lock, exit when idle. */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ConfigError, Headwater, type HeadwaterOptions, SpoolLockedError, UndeliveredError } from "../src/index.js";
import { TestGateway } from "./gateway.js";

const CHILD = join(import.meta.dirname, "fixtures", "child.js");
const FAIL = { status: 503, body: { code: "kafka_unavailable", message: "down" } };

function options(gw: TestGateway, spoolDir: string, extra: Partial<HeadwaterOptions> = {}): HeadwaterOptions {
  return { endpoint: gw.url, writeKey: "wk", spoolDir, lingerMs: 5, retryBaseMs: 10, retryMaxMs: 50, handleExit: false,
    spoolFsync: "never", ...extra };
}

describe("disk spool", () => {
  let gw: TestGateway;
  let dir: string;
  before(async () => {
    gw = await new TestGateway().start();
    dir = mkdtempSync(join(tmpdir(), "hw-ts-spool-"));
  });
  after(async () => {
    await gw.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps undelivered batches on disk at close and resends them with the same ids; seqs continue", async () => {
    const spool = join(dir, "a");
    gw.requests.length = 0;
    gw.script = () => FAIL;
    const c = new Headwater(options(gw, spool, { retryDeadlineMs: 100 }));
    for (let i = 0; i < 100; i++) c.track("page_view", { i });
    await assert.rejects(c.close({ timeoutMs: 500 }), UndeliveredError);
    const firstIds = new Set(gw.requests.map((r) => r.body.batch_id));
    assert.ok(readdirSync(join(spool, "batches")).length >= 3);
    gw.requests.length = 0;
    gw.script = () => undefined;
    const d = new Headwater(options(gw, spool));
    assert.equal(d.producerId, c.producerId);
    const r = d.track("page_view", { after: true });
    assert.deepEqual(r.ok && r.seq, 100, "no gap after a clean close");
    await d.close({ timeoutMs: 10_000 });
    const seqs = gw.events().map((e) => e.seq as number).sort((a, b) => a - b);
    assert.deepEqual(seqs, [...Array(101).keys()]);
    assert.ok(gw.requests.some((q) => firstIds.has(q.body.batch_id)), "a resent batch keeps its batch_id");
    assert.deepEqual(readdirSync(join(spool, "batches")), []);
  });

  it("after kill -9, a new client on the same spool delivers every spooled event and never reuses a seq", async () => {
    const spool = join(dir, "b");
    gw.requests.length = 0;
    gw.script = () => FAIL;
    const child = spawn(process.execPath, [CHILD, gw.url, spool, "500", "spooled"], { stdio: ["ignore", "pipe", "inherit"] });
    const [line] = (await once(child.stdout, "data")) as [Buffer];
    const { last, producer } = JSON.parse(line.toString()) as { last: number; producer: string };
    child.kill("SIGKILL");
    await once(child, "exit");
    assert.equal(last, 499);
    gw.requests.length = 0;
    gw.script = () => undefined;
    const c = new Headwater(options(gw, spool));
    assert.equal(c.producerId, producer);
    const r = c.track("page_view", { after: "crash" });
    assert.ok(r.ok && r.seq > 499, "the next seq is above every seq handed out before the crash");
    await c.close({ timeoutMs: 20_000 });
    const seqs = new Set(gw.events().filter((e) => e.producer_id === producer).map((e) => e.seq as number));
    for (let s = 0; s <= 499; s++) assert.ok(seqs.has(s), `seq ${s} delivered`);
  });

  it("refuses a second live client on the same directory, and takes over from a dead one", async () => {
    const spool = join(dir, "c");
    const a = new Headwater(options(gw, spool));
    assert.throws(() => new Headwater(options(gw, spool)), SpoolLockedError);
    await a.close({ timeoutMs: 1000 });
    writeFileSync(join(spool, "node.lock"), "999999999"); // a pid that does not exist
    const b = new Headwater(options(gw, spool));
    await b.close({ timeoutMs: 1000 });
    assert.equal(existsSync(join(spool, "node.lock")), false);
  });

  it("quarantines a corrupt batch file and counts its events as dropped", async () => {
    const spool = join(dir, "d");
    const c = new Headwater(options(gw, spool));
    await c.close({ timeoutMs: 1000 });
    const name = "00000000000000000000-00000000000000000004-0193e0c2-6a4e-7b1d-9c8f-2f6f1d1b9a10.hwb";
    writeFileSync(join(spool, "batches", name), "HWB1 garbage");
    const d = new Headwater(options(gw, spool));
    await assert.rejects(d.close({ timeoutMs: 5000 }), UndeliveredError);
    assert.equal(d.metrics().dropped.spool_corrupt, 5);
    assert.deepEqual(readdirSync(join(spool, "quarantine")), [name]);
  });

  it("refuses an unusable spool directory with ConfigError", () => {
    const file = join(dir, "a-file");
    writeFileSync(file, "x");
    assert.throws(() => new Headwater(options(gw, join(file, "spool"))), ConfigError);
  });

  it("on SIGTERM, closes the client (flushing) and still ends the process by that signal", async () => {
    gw.requests.length = 0;
    gw.script = () => undefined;
    const child = spawn(process.execPath, [CHILD, gw.url, "-", "5", "serve"], { stdio: ["ignore", "pipe", "inherit"] });
    await once(child.stdout, "data");
    child.kill("SIGTERM");
    const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
    assert.deepEqual([code, signal], [null, "SIGTERM"]);
    assert.equal(gw.events().length, 5);
  });

  it("does not keep an idle process alive, and flushes at exit", async () => {
    gw.requests.length = 0;
    gw.script = () => undefined;
    const child = spawn(process.execPath, [CHILD, gw.url, "-", "3", "idle"], { stdio: "inherit" });
    const [code] = (await once(child, "exit")) as [number];
    assert.equal(code, 0);
    assert.equal(gw.events().length, 3);
  });
});
