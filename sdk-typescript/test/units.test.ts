/** Unit tests of the pure parts: ids, config, event checks, the retry rule, wire parsing, the spool file format. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { buildConfig, optionsFromEnv, withoutUserinfo } from "../src/config.js";
import { ConfigError, InvalidEventError } from "../src/errors.js";
import { checkEventType, encodeEvent, encodeProperties } from "../src/event.js";
import { isUuid, splitBatchId, uuid7 } from "../src/ids.js";
import { backoffMs, classify } from "../src/retry.js";
import { split } from "../src/sender.js";
import { CorruptFileError, decodeBatch, decodeState, encodeBatch, encodeState, fileName, parseName } from "../src/spoolfile.js";
import { type Batch, jsonBody, parseError, parseRejections, parseRetryAfter } from "../src/wire.js";

const PID = "5b7b2d0e-3f3a-4c59-9f61-3f1f3a0c9e4d";
// Written by the Python SDK's _spoolfile.encode_batch: the on-disk format is shared.
const PYTHON_BATCH_HEX =
  "48574231000000cf114cc62b0000008a7b2262617463685f6964223a202230313933653063322d366134652d376231642d396338662d326636663164316239613130222c202270726f64756365725f6964223a202235623762326430652d336633612d346335392d396636312d336631663361306339653464222c202266697273745f736571223a20372c20226c6173745f736571223a20387d000000187b226576656e745f6964223a2261222c22736571223a377d000000217b226576656e745f6964223a2262222c22736571223a382c2270223a22c3a9227d";

describe("ids", () => {
  it("uuid7 has version 7, variant 10, the millisecond time, and sorts by time", () => {
    const a = uuid7(1_795_313_484_990);
    assert.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(parseInt(a.replace(/-/g, "").slice(0, 12), 16), 1_795_313_484_990);
    assert.ok(uuid7(1_795_313_484_991) > a);
    assert.notEqual(uuid7(5), uuid7(5));
  });
  it("split batch ids are the UUIDv5 of '<parent>/<k>' in the protocol's namespace (same as Python's uuid5)", () => {
    assert.equal(splitBatchId("abc", 0), "00681e88-4642-5b59-9102-8b049a0ac3ec");
    assert.notEqual(splitBatchId("abc", 1), splitBatchId("abc", 0));
  });
  it("isUuid", () => {
    assert.ok(isUuid(PID));
    assert.ok(!isUuid("nope"));
    assert.ok(!isUuid(42));
  });
});

describe("config", () => {
  it("fills the Python SDK's defaults", () => {
    const c = buildConfig({ endpoint: "http://x", writeKey: "k" });
    assert.equal(c.maxBatchEvents, 40);
    assert.equal(c.lingerMs, 50);
    assert.equal(c.compression, "zstd");
    assert.equal(c.maxInFlight, 16);
    assert.equal(c.retryDeadlineMs, 300_000);
  });
  it("names the bad option", () => {
    assert.throws(() => buildConfig({ endpoint: "ftp://x", writeKey: "k" }), /endpoint/);
    assert.throws(() => buildConfig({ endpoint: "http://x", writeKey: "" }), /writeKey/);
    assert.throws(() => buildConfig({ endpoint: "http://x", writeKey: "k", maxBatchEvents: 41 }), /maxBatchEvents/);
    assert.throws(() => buildConfig({ endpoint: "http://x", writeKey: "k", compression: "br" as "zstd" }), ConfigError);
    assert.throws(() => buildConfig({ endpoint: "http://x", writeKey: "k", bogus: 1 } as never), /unknown option: bogus/);
  });
  it("refuses URLs that carry credentials, without repeating them", () => {
    for (const options of [{ endpoint: "http://ops:s3cret@gw:8080" }, { endpoints: ["https://gw-a", "https://ops:s3cret@gw-b/x"] },
      { endpoint: "http://gw", registryUrl: "http://ops:s3cret@reg:8081" }]) {
      assert.throws(() => buildConfig({ writeKey: "k", ...options }), (err: Error) =>
        err instanceof ConfigError && /must not carry credentials/.test(err.message) && !err.message.includes("s3cret") &&
        err.message.includes("***@"));
    }
    assert.throws(() => buildConfig({ endpoint: "ftp://me:pw@gw", writeKey: "k" }), (err: Error) => !err.message.includes("pw@"));
    assert.equal(withoutUserinfo("http://gw:1/a@b"), "http://gw:1/a@b");
    assert.equal(withoutUserinfo("http://u:p@gw:1/x?y=@z"), "http://***@gw:1/x?y=@z");
    assert.equal(withoutUserinfo("https://a@b@gw"), "https://***@gw");
  });
  it("reads HEADWATER_* variables, durations in seconds, GATEWAY_URL as an alias", () => {
    const o = optionsFromEnv({ GATEWAY_URL: "http://gw:1", HEADWATER_WRITE_KEY: "k", HEADWATER_LINGER_S: "0.25",
      HEADWATER_MAX_IN_FLIGHT: "2", HEADWATER_SPOOL_DIR: "/tmp/s" });
    assert.deepEqual([o.endpoint, o.lingerMs, o.maxInFlight, o.spoolDir], ["http://gw:1", 250, 2, "/tmp/s"]);
    assert.throws(() => optionsFromEnv({ HEADWATER_ENDPOINT: "http://x", HEADWATER_WRITE_KEY: "k", HEADWATER_MAX_BATCH_EVENTS: "x" }),
      /HEADWATER_MAX_BATCH_EVENTS/);
    assert.throws(() => optionsFromEnv({ HEADWATER_WRITE_KEY: "k" }), /HEADWATER_ENDPOINT or GATEWAY_URL is not set/);
  });
});

describe("events", () => {
  it("refuses bad event types and properties with InvalidEventError", () => {
    assert.throws(() => checkEventType("Page"), InvalidEventError);
    assert.throws(() => checkEventType("a".repeat(65)), InvalidEventError);
    checkEventType("page_view");
    assert.throws(() => encodeProperties([1]), InvalidEventError);
    assert.throws(() => encodeProperties({ x: Number.NaN }), /non-finite/);
    assert.throws(() => encodeProperties({ x: { y: Infinity } }), InvalidEventError);
    assert.throws(() => encodeProperties({ x: 1n }), InvalidEventError);
    assert.throws(() => encodeProperties({ x: "\ud800" }), /surrogate/);
    assert.equal(encodeProperties({ x: "\\ud800 is text", e: "😀" }), '{"x":"\\\\ud800 is text","e":"😀"}');
  });
  it("writes properties exactly as JSON.stringify does", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = { back: cyclic };
    const cases: object[] = [
      {}, { a: 1, b: -0, c: 1e21, d: 1.5e-7, e: true, f: false, g: null, h: undefined, i: Symbol("s"), j: "x" },
      { q: 'say "hi"\\ \n\t\u0001 \u007f \u2028', long: "lorem ipsum ".repeat(200), emoji: "😀", e: "é" },
      { "quote\"key": 1, "new\nline": 2, "é": 3, "2": "numeric keys first", "1": 0 },
      { nested: { a: [1, "two", null, { b: undefined }], d: new Date(0), m: new Map([[1, 2]]) }, arr: [undefined, () => 1] },
      { n: new Number(5), s: new String("x"), b: new Boolean(false) },
      Object.assign(Object.create(null) as object, { a: "no prototype" }),
      { d: new Date(0) }, { withToJSON: { toJSON: (k: string) => `key ${k}` } },
      new Date(0), new Map([["a", 1]]), new String("boxed"), Object.assign(Object.create({ inherited: 1 }) as object, { own: 2 }),
      { get g() { return "getter"; } }, new Proxy({ a: 1, b: "p" }, {}),
    ];
    for (const c of cases) assert.equal(encodeProperties(c), JSON.stringify(c));
    const message = (f: () => unknown): string => {
      try {
        f();
      } catch (err) {
        return (err as Error).message;
      }
      return "no error";
    };
    const NOT_FINITE = /non-finite number \((NaN|Infinity|-Infinity)\)/;
    assert.match(message(() => encodeProperties({ a: "x", b: Number.NaN })), NOT_FINITE);
    assert.match(message(() => encodeProperties({ a: { b: [1, -Infinity] } })), /non-finite number \(-Infinity\)/);
    assert.match(message(() => encodeProperties({ a: Number.NaN, b: 1n })), /cannot be encoded as JSON: .*BigInt/);
    assert.match(message(() => encodeProperties({ a: { b: 1n } })), /cannot be encoded as JSON: .*BigInt/);
    let circular = "";
    try {
      JSON.stringify(cyclic);
    } catch (err) {
      circular = (err as Error).message;
    }
    assert.equal(message(() => encodeProperties(cyclic)), `properties cannot be encoded as JSON: ${circular}`);
    assert.match(message(() => encodeProperties({ get boom(): string { throw new Error("getter failed"); } })),
      /cannot be encoded as JSON: getter failed/);
    assert.match(message(() => encodeProperties({ a: { b: "\udc00" } })), /surrogate/);
    assert.match(message(() => encodeProperties({ "\ud800": 1 })), /surrogate/);
    assert.match(message(() => encodeProperties({ a: "ok", b: "x\udfff" })), /surrogate/);
  });
  it("encodes the envelope of protocol.md section 2", () => {
    const ev = encodeEvent("page_view", '{"a":1}', '"u1"', "", 1000, 7, { producerId: PID, nodeIdJson: '"n"', contextJson: '{"app":"x"}' });
    const doc = JSON.parse(ev.json) as Record<string, unknown>;
    assert.deepEqual(Object.keys(doc), ["event_id", "event_type", "producer_id", "seq", "node_id", "created_at", "partition_key", "context", "properties"]);
    assert.equal(doc.seq, 7);
    assert.equal(doc.event_id, ev.eventId);
    assert.equal(ev.bytes, Buffer.byteLength(ev.json));
  });
  it("uuid7 ids of one millisecond share its time and differ", () => {
    const ids = Array.from({ length: 1000 }, () => uuid7(1_795_313_484_990));
    assert.equal(new Set(ids).size, ids.length);
    for (const id of ids) assert.match(id, /^01a20105-c4be-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

describe("wire", () => {
  const batchOf = (events: string[], nbytes = events.reduce((s, e) => s + Buffer.byteLength(e), 0)): Batch =>
    ({ batchId: "b", producerId: PID, firstSeq: 0, lastSeq: events.length - 1, events, nbytes });
  const joined = (events: string[]): string => `{"batch_id":"b","sent_at":5,"sdk":{"name":"headwater-node","version":"0.1.0"},"events":[${events.join(",")}]}`;
  it("the JSON body is the envelopes joined, whether nbytes is right or not", () => {
    const events = ['{"seq":0,"p":"é"}', '{"seq":1,"p":"😀"}', '{"seq":2}'];
    for (const evs of [events, events.slice(0, 1), []]) {
      const want = joined(evs);
      assert.equal(jsonBody(batchOf(evs), 5).toString("utf8"), want);
      for (const off of [-3, -1, 1, 4, 5, 100]) {
        assert.equal(jsonBody(batchOf(evs, Math.max(0, batchOf(evs).nbytes + off)), 5).toString("utf8"), want);
      }
    }
  });
});

describe("retry rule", () => {
  it("classifies every status as the retry rule of protocol.md §4 says", () => {
    for (const s of [200, 422]) assert.equal(classify(s), "done");
    assert.equal(classify(413), "split");
    for (const s of [408, 429, 500, 502, 503, 504]) assert.equal(classify(s), "retry");
    for (const s of [301, 400, 401, 403, 404, 405, 415, 501, 505]) assert.equal(classify(s), "refused");
  });
  it("full jitter under the cap, never below Retry-After", () => {
    for (let a = 1; a < 20; a++) {
      const d = backoffMs(a, 500, 30_000, undefined);
      assert.ok(d >= 0 && d <= Math.min(30_000, 500 * 2 ** (a - 1)));
    }
    assert.equal(backoffMs(1, 500, 30_000, 2.5, () => 0), 2500);
    assert.equal(backoffMs(3, 500, 30_000, 0.1, () => 1), 2000);
  });
  it("parses Retry-After as seconds, decimals or an HTTP-date", () => {
    assert.equal(parseRetryAfter("3"), 3);
    assert.equal(parseRetryAfter("0.5"), 0.5);
    assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6);
    assert.equal(parseRetryAfter("soon"), undefined);
    assert.equal(parseRetryAfter(undefined), undefined);
  });
  it("parses error bodies, http_<status> when not the JSON error", () => {
    assert.deepEqual(parseError(Buffer.from('{"code":"invalid_write_key","message":"no"}'), 401), ["invalid_write_key", "no"]);
    assert.equal(parseError(Buffer.from("<html>"), 502)[0], "http_502");
    assert.deepEqual(parseRejections(Buffer.from('{"rejected":[{"index":1,"code":"c","message":"m"}]}')), [{ index: 1, code: "c", message: "m" }]);
    assert.deepEqual(parseRejections(Buffer.from("junk")), []);
  });
  it("splits first floor(n/2) events, then the rest, with their seq ranges", () => {
    const events = [0, 1, 2, 3, 4].map((s) => `{"event_id":"e${s}","seq":${10 + s}}`);
    const [a, b] = split({ batchId: "p", producerId: PID, firstSeq: 10, lastSeq: 14, events, nbytes: 0 });
    assert.deepEqual([a.events.length, a.firstSeq, a.lastSeq, b.events.length, b.firstSeq, b.lastSeq], [2, 10, 11, 3, 12, 14]);
    assert.equal(a.batchId, splitBatchId("p", 0));
    assert.equal(b.batchId, splitBatchId("p", 1));
  });
});

describe("spool file format", () => {
  const batch = { batchId: "0193e0c2-6a4e-7b1d-9c8f-2f6f1d1b9a10", producerId: PID, firstSeq: 7, lastSeq: 8,
    events: ['{"event_id":"a","seq":7}', '{"event_id":"b","seq":8,"p":"é"}'], nbytes: 0 };
  it("reads a batch file the Python SDK wrote, and round-trips its own", () => {
    const fromPython = decodeBatch(Buffer.from(PYTHON_BATCH_HEX, "hex"));
    assert.deepEqual([fromPython.batchId, fromPython.producerId, fromPython.firstSeq, fromPython.lastSeq, fromPython.events],
      [batch.batchId, PID, 7, 8, batch.events]);
    const again = decodeBatch(encodeBatch(batch));
    assert.deepEqual(again.events, batch.events);
  });
  it("refuses a corrupt file", () => {
    const data = encodeBatch(batch);
    data.writeUInt8(data.readUInt8(data.length - 3) ^ 0xff, data.length - 3);
    assert.throws(() => decodeBatch(data), CorruptFileError);
    assert.throws(() => decodeBatch(data.subarray(0, 6)), CorruptFileError);
  });
  it("names files in seq order and reads the state file the Python SDK writes", () => {
    assert.equal(fileName(batch), `00000000000000000007-00000000000000000008-${batch.batchId}.hwb`);
    assert.deepEqual(parseName(fileName(batch)), [7, 8, batch.batchId]);
    assert.deepEqual(decodeState(Buffer.from(`{"producer_id": "${PID}", "next_seq": 42, "crc": 3009037849}`)), [PID, 42]);
    assert.deepEqual(decodeState(encodeState(PID, 9)), [PID, 9]);
    assert.throws(() => decodeState(Buffer.from(`{"producer_id": "${PID}", "next_seq": 43, "crc": 3009037849}`)), CorruptFileError);
  });
});

describe("zstd where install scripts are off", () => {
  it("falls back to gzip, says so once, and prefers zlib's zstd where the runtime has it", async () => {
    const { chooseZstd } = await import("../src/compress.js");
    const warnings: string[] = [];
    const onWarning = (w: Error): void => { warnings.push(w.message); };
    process.on("warning", onWarning);
    try {
      const gzip = await chooseZstd(undefined, () => Promise.reject(new Error("Cannot find module 'zstd-napi.node'")));
      assert.equal(gzip.encoding, "gzip");
      assert.equal(gzip.implementation, "zlib-gzip");
      assert.deepEqual(gunzipSync(gzip.compress(Buffer.from("abc"))), Buffer.from("abc"));
      await new Promise((r) => setImmediate(r));
      assert.ok(warnings.some((m) => m.includes("sending gzip instead")), warnings.join("; "));
      const native = await chooseZstd((b) => Buffer.concat([Buffer.from("z"), b]), () => Promise.reject(new Error("unused")));
      assert.equal(native.implementation, "zlib");
    } finally {
      process.off("warning", onWarning);
    }
  });
});
