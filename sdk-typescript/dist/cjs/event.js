"use strict";
/** Events: the checks of `track()` and the JSON envelope of one event (protocol.md section 2), as a string. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.checkEventType = checkEventType;
exports.encodeProperties = encodeProperties;
exports.toEpochMs = toEpochMs;
exports.checkOptions = checkOptions;
exports.encodeEvent = encodeEvent;
const errors_js_1 = require("./errors.js");
const ids_js_1 = require("./ids.js");
const EVENT_TYPE = /^[a-z][a-z0-9_]{0,63}$/;
const validTypes = new Set(); // event types seen valid: a set lookup instead of a regex per call
const VALID_TYPES_MAX = 4096;
const LONE_SURROGATE = /(?:^|[^\\])(?:\\\\)*\\u[dD][89abcdefABCDEF]/;
/** Check `eventType` (cached) and throw InvalidEventError if it is not `[a-z][a-z0-9_]{0,63}`. */
function checkEventType(eventType) {
    if (typeof eventType === "string" && validTypes.has(eventType))
        return;
    if (typeof eventType !== "string" || !EVENT_TYPE.test(eventType)) {
        throw new errors_js_1.InvalidEventError(`event_type must match [a-z][a-z0-9_]{0,63}, got ${JSON.stringify(String(eventType))}`);
    }
    if (validTypes.size < VALID_TYPES_MAX)
        validTypes.add(eventType);
}
function finiteOnly(_key, value) {
    if (typeof value === "number" && !Number.isFinite(value)) {
        throw new errors_js_1.InvalidEventError(`properties hold a non-finite number (${value}); JSON has no NaN or Infinity`);
    }
    return value;
}
/** The JSON of `properties`; throws InvalidEventError for non-objects, NaN/Infinity, BigInt, cycles. */
function encodeProperties(properties) {
    if (properties === undefined || properties === null)
        return "{}";
    if (typeof properties !== "object" || Array.isArray(properties)) {
        throw new errors_js_1.InvalidEventError(`properties must be an object, got ${Array.isArray(properties) ? "an array" : typeof properties}`);
    }
    let out;
    try {
        // The replacer-free stringify is V8's fast path; NaN and Infinity come out as `null`, so only output
        // holding a null is stringified again with the check (the second pass throws for a non-finite number).
        out = JSON.stringify(properties);
        if (out.includes("null"))
            JSON.stringify(properties, finiteOnly);
    }
    catch (err) {
        if (err instanceof errors_js_1.InvalidEventError)
            throw err;
        throw new errors_js_1.InvalidEventError(`properties cannot be encoded as JSON: ${err.message}`);
    }
    if (out.includes("\\u") && LONE_SURROGATE.test(out)) {
        throw new errors_js_1.InvalidEventError("properties hold a string with a lone UTF-16 surrogate (not valid UTF-8)");
    }
    return out;
}
/** Epoch milliseconds of a `timestamp` option (a Date or epoch milliseconds). */
function toEpochMs(timestamp) {
    if (timestamp === undefined || timestamp === null)
        return Date.now();
    const ms = timestamp instanceof Date ? timestamp.getTime() : timestamp;
    if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
        throw new errors_js_1.InvalidEventError(`timestamp must be a Date or epoch milliseconds >= 0, got ${String(timestamp)}`);
    }
    return Math.floor(ms);
}
/** Check the options of `track()`; returns [partitionKey JSON or null, eventId, createdAt]. */
function checkOptions(options) {
    if (options === undefined)
        return [null, "", Date.now()];
    if (options === null || typeof options !== "object")
        throw new errors_js_1.InvalidEventError("track options must be an object");
    const { partitionKey, eventId, timestamp } = options;
    if (partitionKey !== undefined && partitionKey !== null && typeof partitionKey !== "string") {
        throw new errors_js_1.InvalidEventError("partitionKey must be a string");
    }
    if (eventId !== undefined && eventId !== null && !(0, ids_js_1.isUuid)(eventId)) {
        throw new errors_js_1.InvalidEventError(`eventId must be a UUID string, got ${JSON.stringify(String(eventId))}`);
    }
    const key = typeof partitionKey === "string" ? JSON.stringify(partitionKey) : null;
    return [key, typeof eventId === "string" ? eventId.toLowerCase() : "", toEpochMs(timestamp)];
}
/** The envelope JSON of one event; `eventId` "" means a new UUIDv7 from `createdAt`. */
function encodeEvent(eventType, propertiesJson, partitionKeyJson, eventId, createdAt, seq, parts) {
    const id = eventId === "" ? (0, ids_js_1.uuid7)(createdAt) : eventId;
    let json = `{"event_id":"${id}","event_type":"${eventType}","producer_id":"${parts.producerId}","seq":${seq},"node_id":${parts.nodeIdJson},"created_at":${createdAt}`;
    if (partitionKeyJson !== null)
        json += `,"partition_key":${partitionKeyJson}`;
    if (parts.contextJson !== null)
        json += `,"context":${parts.contextJson}`;
    json += `,"properties":${propertiesJson}}`;
    return { json, bytes: Buffer.byteLength(json), eventId: id };
}
