/** The shared protocol fixtures (sdk-specs/vectors/fixtures/*.json) and the Avro writer. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { AvroCompiler, AvroMismatch, AvroWriter, avroBatchBody, framed } from "../src/avro.js";
import { splitBatchId } from "../src/ids.js";
import { parseRetryAfter } from "../src/wire.js";

type Fixture = Record<string, unknown>;
const DIR = join(import.meta.dirname, "..", "..", "..", "sdk-specs", "vectors", "fixtures");
const load = (name: string): Fixture[] =>
  (JSON.parse(readFileSync(join(DIR, `${name}.json`), "utf8")) as Array<{ fixture: Fixture }>).map((v) => v.fixture);

describe("protocol fixtures", () => {
  it("split ids", () => {
    for (const f of load("split-ids")) {
      const parent = f.parent as string;
      assert.deepEqual([splitBatchId(parent, 0), splitBatchId(parent, 1)], f.halves);
    }
  });
  it("Retry-After", () => {
    for (const f of load("retry-after")) {
      assert.equal(parseRetryAfter(f.header as string, (f.now as number) * 1000) ?? null, f.seconds, String(f.header));
    }
  });
  it("Avro framing: exactly the fixture's bytes", () => {
    for (const f of load("avro-framing")) {
      const schema = new AvroCompiler().compile(f.schema as Record<string, unknown>);
      assert.equal(framed(f.schema_id as number, schema.write, f.record).toString("hex"), f.framed_hex);
    }
  });
});

describe("avro writer", () => {
  const compile = (s: unknown) => new AvroCompiler().compile(s as Record<string, unknown>);
  const bytes = (s: unknown, v: unknown): string => {
    const w = new AvroWriter();
    compile(s).write(w, v);
    return w.result().toString("hex");
  };
  it("encodes longs as zigzag varints, also beyond 32 bits", () => {
    assert.equal(bytes("long", 0), "00");
    assert.equal(bytes("long", -1), "01");
    assert.equal(bytes("long", 64), "8001");
    assert.equal(bytes("long", 1_795_313_484_990), "fc92ae90c068");
    assert.equal(bytes("long", -(2 ** 40)), "ffffffffff3f");
  });
  it("maps JSON onto unions, maps, arrays, enums, bytes", () => {
    const s = { type: "record", name: "r", fields: [
      { name: "u", type: ["null", "int", "string"] }, { name: "m", type: { type: "map", values: "double" } },
      { name: "a", type: { type: "array", items: "boolean" } }, { name: "e", type: { type: "enum", name: "E", symbols: ["x", "y"] } },
      { name: "b", type: "bytes" }, { name: "d", type: "int", default: 5 }] };
    assert.equal(bytes(s, { u: "hi", m: {}, a: [true], e: "y", b: "AQI=" }), "0404686900020100020401020a");
    assert.throws(() => bytes(s, { u: 1.5, m: {}, a: [], e: "x", b: "" }), AvroMismatch);
    assert.throws(() => bytes(s, { u: null, m: {}, a: [], e: "z", b: "" }), AvroMismatch);
    assert.throws(() => bytes(s, { u: null, m: {}, a: [], e: "x", b: "", extra: 1 }), /no such field/);
    assert.throws(() => bytes("int", 2 ** 31), AvroMismatch);
  });
  it("writes batch.avsc's record", () => {
    const body = avroBatchBody("b", 1, "n", "v", [Buffer.from([0, 1])]);
    assert.equal(body.toString("hex"), "0262" + "02" + "026e" + "0276" + "02" + "04" + "0001" + "00");
  });
});
