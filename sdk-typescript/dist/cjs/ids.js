"use strict";
/** Identifiers: time-ordered UUIDv7 event and batch ids, random producer ids, derived ids of split batches. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.uuid7 = uuid7;
exports.newProducerId = newProducerId;
exports.uuid5 = uuid5;
exports.splitBatchId = splitBatchId;
exports.isUuid = isUuid;
const node_crypto_1 = require("node:crypto");
const SPLIT_NAMESPACE = Buffer.from("6f1f0c2e9a104b598d552f6f1d1b9a10", "hex");
const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
// Random bytes are drawn 4 KiB at a time: one syscall per ~400 ids instead of one per id.
let pool = Buffer.alloc(0);
let poolPos = 0;
function random10() {
    if (poolPos + 10 > pool.length) {
        pool = (0, node_crypto_1.randomBytes)(4096);
        poolPos = 0;
    }
    const at = poolPos;
    poolPos += 10;
    return at;
}
/** A UUIDv7 string (RFC 9562): 48-bit millisecond timestamp, version 7, variant 10, 74 random bits. */
function uuid7(unixMs = Date.now()) {
    const r = random10();
    const p = pool;
    const ts = unixMs.toString(16).padStart(12, "0").slice(-12);
    return (`${ts.slice(0, 8)}-${ts.slice(8, 12)}-7${HEX[p[r]]?.[1]}${HEX[p[r + 1]]}-` +
        `${HEX[(p[r + 2] & 0x3f) | 0x80]}${HEX[p[r + 3]]}-` +
        `${HEX[p[r + 4]]}${HEX[p[r + 5]]}${HEX[p[r + 6]]}` +
        `${HEX[p[r + 7]]}${HEX[p[r + 8]]}${HEX[p[r + 9]]}`);
}
/** A random producer id (UUIDv4). */
function newProducerId() {
    return (0, node_crypto_1.randomUUID)();
}
/** The RFC 9562 name-based SHA-1 UUID (version 5) of `name` in `namespace` (16 bytes). */
function uuid5(namespace, name) {
    const hash = (0, node_crypto_1.createHash)("sha1").update(namespace).update(name, "utf8").digest();
    hash[6] = (hash[6] & 0x0f) | 0x50;
    hash[8] = (hash[8] & 0x3f) | 0x80;
    const h = hash.subarray(0, 16).toString("hex");
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
/** The batch id of half `half` (0 or 1) of a split batch: derived, so a crash during a split reuses it. */
function splitBatchId(batchId, half) {
    return uuid5(SPLIT_NAMESPACE, `${batchId}/${half}`);
}
/** True if `value` is a UUID string (any version, dashes required). */
function isUuid(value) {
    return typeof value === "string" && UUID_RE.test(value);
}
