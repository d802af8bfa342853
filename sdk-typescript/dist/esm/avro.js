/**
 * A small Avro binary writer for the fast path (protocol.md section 3): schemas compiled into writer
 * functions (records, enums, arrays, maps, unions, fixed, primitives, named references), values mapped as
 * protocol.md section 2 maps JSON onto Avro (bytes and fixed as base64), and batch.avsc's record.
 */
/** A value does not match the schema: the event is rejected locally (`schema_mismatch`). */
export class AvroMismatch extends Error {
}
/** A growable output buffer. */
export class AvroWriter {
    buf = Buffer.allocUnsafe(1024);
    pos = 0;
    room(n) {
        if (this.pos + n <= this.buf.length)
            return;
        const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
        this.buf.copy(next, 0, 0, this.pos);
        this.buf = next;
    }
    byte(b) {
        this.room(1);
        this.buf[this.pos++] = b;
    }
    long(n) {
        if (typeof n === "number" && Number.isSafeInteger(n) && Math.abs(n) < 2 ** 30) {
            let z = n >= 0 ? n * 2 : -n * 2 - 1;
            this.room(5);
            while (z > 0x7f) {
                this.buf[this.pos++] = (z & 0x7f) | 0x80;
                z >>>= 7;
            }
            this.buf[this.pos++] = z;
            return;
        }
        const v = BigInt(n);
        let z = BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
        this.room(10);
        while (z > 0x7fn) {
            this.buf[this.pos++] = Number(z & 0x7fn) | 0x80;
            z >>= 7n;
        }
        this.buf[this.pos++] = Number(z);
    }
    bytes(b) {
        this.long(b.length);
        this.raw(b);
    }
    raw(b) {
        this.room(b.length);
        b.copy(this.buf, this.pos);
        this.pos += b.length;
    }
    string(s) {
        this.bytes(Buffer.from(s, "utf8"));
    }
    float(x) {
        this.room(4);
        this.pos = this.buf.writeFloatLE(x, this.pos);
    }
    double(x) {
        this.room(8);
        this.pos = this.buf.writeDoubleLE(x, this.pos);
    }
    result() {
        return Buffer.from(this.buf.subarray(0, this.pos));
    }
}
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const INT32 = (v) => Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31;
const INT64 = (v) => (Number.isInteger(v) && Math.abs(v) <= Number.MAX_SAFE_INTEGER) || typeof v === "bigint";
function fail(path, expected, value) {
    throw new AvroMismatch(`${path || "value"}: expected ${expected}, got ${JSON.stringify(value) ?? typeof value}`);
}
const PRIMITIVES = {
    null: (p) => ({ accepts: (v) => v === null, write: (_w, v) => (v === null ? undefined : fail(p, "null", v)) }),
    boolean: (p) => ({ accepts: (v) => typeof v === "boolean",
        write: (w, v) => (typeof v === "boolean" ? w.byte(v ? 1 : 0) : fail(p, "boolean", v)) }),
    int: (p) => ({ accepts: INT32, write: (w, v) => (INT32(v) ? w.long(v) : fail(p, "int", v)) }),
    long: (p) => ({ accepts: INT64, write: (w, v) => (INT64(v) ? w.long(v) : fail(p, "long", v)) }),
    float: (p) => ({ accepts: (v) => typeof v === "number" && Number.isFinite(v),
        write: (w, v) => (typeof v === "number" && Number.isFinite(v) ? w.float(v) : fail(p, "float", v)) }),
    double: (p) => ({ accepts: (v) => typeof v === "number" && Number.isFinite(v),
        write: (w, v) => (typeof v === "number" && Number.isFinite(v) ? w.double(v) : fail(p, "double", v)) }),
    string: (p) => ({ accepts: (v) => typeof v === "string", write: (w, v) => (typeof v === "string" ? w.string(v) : fail(p, "string", v)) }),
    bytes: (p) => ({ accepts: (v) => typeof v === "string",
        write: (w, v) => (typeof v === "string" ? w.bytes(Buffer.from(v, "base64")) : fail(p, "base64 bytes", v)) }),
};
/** Compiles schemas; named types (records, enums, fixed) are shared across the schemas of one compiler. */
export class AvroCompiler {
    named = new Map();
    compile(schema, namespace = "", path = "") {
        if (typeof schema === "string") {
            const primitive = PRIMITIVES[schema];
            if (primitive !== undefined)
                return primitive(path);
            const full = schema.includes(".") || namespace === "" ? schema : `${namespace}.${schema}`;
            const ref = this.named.get(full) ?? this.named.get(schema);
            if (ref === undefined)
                throw new AvroMismatch(`unknown type ${schema}`);
            return { accepts: (v) => ref.accepts(v), write: (w, v) => ref.write(w, v) };
        }
        if (Array.isArray(schema))
            return this.union(schema, namespace, path);
        const type = schema.type;
        if (typeof type !== "string")
            return this.compile(type, namespace, path);
        switch (type) {
            case "record":
            case "error":
                return this.record(schema, namespace, path);
            case "enum": {
                const symbols = schema.symbols;
                const c = { accepts: (v) => typeof v === "string" && symbols.includes(v),
                    write: (w, v) => { const i = symbols.indexOf(v); if (i < 0)
                        fail(path, `one of ${symbols.join("|")}`, v); w.long(i); } };
                this.name(schema, namespace, c);
                return c;
            }
            case "fixed": {
                const size = schema.size;
                const c = { accepts: (v) => typeof v === "string",
                    write: (w, v) => { const b = typeof v === "string" ? Buffer.from(v, "base64") : fail(path, "base64", v); if (b.length !== size)
                        fail(path, `${size} bytes`, v); w.raw(b); } };
                this.name(schema, namespace, c);
                return c;
            }
            case "array": {
                const items = this.compile(schema.items, namespace, `${path}[]`);
                return { accepts: Array.isArray, write: (w, v) => {
                        if (!Array.isArray(v))
                            fail(path, "array", v);
                        if (v.length > 0) {
                            w.long(v.length);
                            for (const x of v)
                                items.write(w, x);
                        }
                        w.byte(0);
                    } };
            }
            case "map": {
                const values = this.compile(schema.values, namespace, `${path}{}`);
                return { accepts: isObject, write: (w, v) => {
                        if (!isObject(v))
                            fail(path, "map", v);
                        const keys = Object.keys(v);
                        if (keys.length > 0) {
                            w.long(keys.length);
                            for (const k of keys) {
                                w.string(k);
                                values.write(w, v[k]);
                            }
                        }
                        w.byte(0);
                    } };
            }
            default:
                return this.compile(type, namespace, path); // {"type": "long", "logicalType": ...}
        }
    }
    name(schema, namespace, c) {
        const name = schema.name;
        const ns = schema.namespace ?? namespace;
        const full = name.includes(".") || ns === "" ? name : `${ns}.${name}`;
        this.named.set(full, c);
        return full.includes(".") ? full.slice(0, full.lastIndexOf(".")) : "";
    }
    record(schema, namespace, path) {
        const fields = [];
        const c = {
            accepts: isObject,
            write: (w, v) => {
                if (!isObject(v))
                    fail(path, "record", v);
                for (const f of fields) {
                    const value = v[f.name] === undefined && f.hasDefault ? f.def : v[f.name];
                    f.write(w, value === undefined ? null : value);
                }
                for (const k of Object.keys(v)) {
                    if (!fields.some((f) => f.name === k))
                        fail(`${path}.${k}`, "no such field", v[k]);
                }
            },
        };
        const ns = this.name(schema, namespace, c); // before the fields: a record may refer to itself
        for (const f of schema.fields) {
            const name = f.name;
            const compiled = this.compile(f.type, ns, path ? `${path}.${name}` : name);
            fields.push({ name, write: compiled.write, hasDefault: "default" in f, def: f.default });
        }
        return c;
    }
    union(branches, namespace, path) {
        const compiled = branches.map((b) => this.compile(b, namespace, path));
        const pick = (v) => compiled.findIndex((c) => c.accepts(v));
        return {
            accepts: (v) => pick(v) >= 0,
            write: (w, v) => {
                const i = pick(v);
                if (i < 0)
                    fail(path, "a value of one union branch", v);
                w.long(i);
                compiled[i].write(w, v);
            },
        };
    }
}
/** The Avro batch body (batch.avsc): batch_id, sent_at, sdk_name, sdk_version, events (framed bytes). */
export function avroBatchBody(batchId, sentAt, sdkName, sdkVersion, events) {
    const w = new AvroWriter();
    w.string(batchId);
    w.long(sentAt);
    w.string(sdkName);
    w.string(sdkVersion);
    if (events.length > 0) {
        w.long(events.length);
        for (const e of events)
            w.bytes(e);
    }
    w.byte(0);
    return w.result();
}
/** One event in Confluent framing: magic 0, the 4-byte big-endian schema id, the record's Avro binary. */
export function framed(schemaId, write, record) {
    const w = new AvroWriter();
    w.byte(0);
    w.byte((schemaId >>> 24) & 0xff);
    w.byte((schemaId >>> 16) & 0xff);
    w.byte((schemaId >>> 8) & 0xff);
    w.byte(schemaId & 0xff);
    write(w, record);
    return w.result();
}
