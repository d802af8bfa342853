/** Events: the checks of `track()` and the JSON envelope of one event (protocol.md section 2), as a string. */
import { InvalidEventError } from "./errors.js";
import { isUuid, uuid7 } from "./ids.js";
const EVENT_TYPE = /^[a-z][a-z0-9_]{0,63}$/;
const validTypes = new Set(); // event types seen valid: a set lookup instead of a regex per call
const VALID_TYPES_MAX = 4096;
const LONE_SURROGATE = /(?:^|[^\\])(?:\\\\)*\\u[dD][89abcdefABCDEF]/;
/** Check `eventType` (cached) and throw InvalidEventError if it is not `[a-z][a-z0-9_]{0,63}`. */
export function checkEventType(eventType) {
    if (typeof eventType === "string" && validTypes.has(eventType))
        return;
    if (typeof eventType !== "string" || !EVENT_TYPE.test(eventType)) {
        throw new InvalidEventError(`event_type must match [a-z][a-z0-9_]{0,63}, got ${JSON.stringify(String(eventType))}`);
    }
    if (validTypes.size < VALID_TYPES_MAX)
        validTypes.add(eventType);
}
function finiteOnly(_key, value) {
    if (typeof value === "number" && !Number.isFinite(value)) {
        throw new InvalidEventError(`properties hold a non-finite number (${value}); JSON has no NaN or Infinity`);
    }
    return value;
}
// What JSON.stringify writes otherwise than as it is: a quote, a backslash, a control character, a surrogate.
// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const keyJson = new Map(); // property names seen, quoted: a lookup instead of a regex per key
const KEY_JSON_MAX = 4096;
function quoteKey(key) {
    let quoted = keyJson.get(key);
    if (quoted === undefined) {
        quoted = NEEDS_ESCAPE.test(key) ? JSON.stringify(key) : `"${key}"`;
        if (keyJson.size < KEY_JSON_MAX)
            keyJson.set(key, quoted);
    }
    return quoted;
}
/** Nested values seen by `plainJson` hold a null: NaN or Infinity may hide there. */
let nestedNull = false;
/** `plainJson` wrote a backslash (through JSON.stringify): an escaped lone surrogate may be there. */
let escaped = false;
/**
 * What `JSON.stringify(obj)` writes, for a plain object, built here: V8 (Node 20) copies strings into JSON
 * character by character, while a string that needs no escape is only scanned here (a long property value
 * costs about half). Nested objects and arrays go to JSON.stringify. Undefined when only the full
 * JSON.stringify path decides exactly (a non-finite number, a BigInt, a function, a toJSON, or an error).
 */
function plainJson(obj) {
    const proto = Object.getPrototypeOf(obj);
    if ((proto !== Object.prototype && proto !== null) || typeof obj.toJSON === "function")
        return undefined;
    const keys = Object.keys(obj);
    let out = "";
    nestedNull = false;
    escaped = false;
    for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        const v = obj[key];
        let json;
        switch (typeof v) {
            case "string":
                if (NEEDS_ESCAPE.test(v)) {
                    json = JSON.stringify(v);
                    escaped = true;
                }
                else {
                    json = `"${v}"`;
                }
                break;
            case "number":
                if (!Number.isFinite(v))
                    return undefined;
                json = `${v}`;
                break;
            case "boolean":
                json = v ? "true" : "false";
                break;
            case "undefined":
            case "symbol":
                continue; // JSON.stringify leaves the key out
            case "object":
                if (v === null) {
                    json = "null";
                    break;
                }
                if (typeof v.toJSON === "function")
                    return undefined; // called with its key
                try {
                    json = JSON.stringify(v); // typed string; undefined only through a toJSON, checked all the same
                }
                catch {
                    return undefined; // the full path gives the error as it reads in context (a cycle's path)
                }
                if (json === undefined)
                    return undefined;
                if (json.includes("null"))
                    nestedNull = true;
                escaped = true;
                break;
            default:
                return undefined; // bigint, function
        }
        const quoted = quoteKey(key);
        if (quoted.length !== key.length + 2)
            escaped = true;
        out = out === "" ? `${quoted}:${json}` : `${out},${quoted}:${json}`;
    }
    return `{${out}}`;
}
/** The JSON of `properties`; throws InvalidEventError for non-objects, NaN/Infinity, BigInt, cycles. */
export function encodeProperties(properties) {
    if (properties === undefined || properties === null)
        return "{}";
    if (typeof properties !== "object" || Array.isArray(properties)) {
        throw new InvalidEventError(`properties must be an object, got ${Array.isArray(properties) ? "an array" : typeof properties}`);
    }
    let out;
    let check = true; // look for an escaped lone surrogate
    try {
        const plain = plainJson(properties);
        if (plain !== undefined) {
            out = plain;
            check = escaped; // without a backslash there is no escape
            if (nestedNull)
                JSON.stringify(properties, finiteOnly); // throws for a non-finite number, as below
        }
        else {
            // The replacer-free stringify is V8's fast path; NaN and Infinity come out as `null`, so only output
            // holding a null is stringified again with the check (the second pass throws for a non-finite number).
            out = JSON.stringify(properties);
            if (out.includes("null"))
                JSON.stringify(properties, finiteOnly);
        }
    }
    catch (err) {
        if (err instanceof InvalidEventError)
            throw err;
        throw new InvalidEventError(`properties cannot be encoded as JSON: ${err.message}`);
    }
    if (check && out.includes("\\u") && LONE_SURROGATE.test(out)) {
        throw new InvalidEventError("properties hold a string with a lone UTF-16 surrogate (not valid UTF-8)");
    }
    return out;
}
/** Epoch milliseconds of a `timestamp` option (a Date or epoch milliseconds). */
export function toEpochMs(timestamp) {
    if (timestamp === undefined || timestamp === null)
        return Date.now();
    const ms = timestamp instanceof Date ? timestamp.getTime() : timestamp;
    if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
        throw new InvalidEventError(`timestamp must be a Date or epoch milliseconds >= 0, got ${String(timestamp)}`);
    }
    return Math.floor(ms);
}
/** Check the options of `track()`; returns [partitionKey JSON or null, eventId, createdAt]. */
export function checkOptions(options) {
    if (options === undefined)
        return [null, "", Date.now()];
    if (options === null || typeof options !== "object")
        throw new InvalidEventError("track options must be an object");
    const { partitionKey, eventId, timestamp } = options;
    if (partitionKey !== undefined && partitionKey !== null && typeof partitionKey !== "string") {
        throw new InvalidEventError("partitionKey must be a string");
    }
    if (eventId !== undefined && eventId !== null && !isUuid(eventId)) {
        throw new InvalidEventError(`eventId must be a UUID string, got ${JSON.stringify(String(eventId))}`);
    }
    const key = typeof partitionKey === "string" ? JSON.stringify(partitionKey) : null;
    return [key, typeof eventId === "string" ? eventId.toLowerCase() : "", toEpochMs(timestamp)];
}
/** The envelope JSON of one event; `eventId` "" means a new UUIDv7 from `createdAt`. */
export function encodeEvent(eventType, propertiesJson, partitionKeyJson, eventId, createdAt, seq, parts) {
    const id = eventId === "" ? uuid7(createdAt) : eventId;
    let json = `{"event_id":"${id}","event_type":"${eventType}","producer_id":"${parts.producerId}","seq":${seq},"node_id":${parts.nodeIdJson},"created_at":${createdAt}`;
    if (partitionKeyJson !== null)
        json += `,"partition_key":${partitionKeyJson}`;
    if (parts.contextJson !== null)
        json += `,"context":${parts.contextJson}`;
    json += `,"properties":${propertiesJson}}`;
    return { json, bytes: Buffer.byteLength(json), eventId: id };
}
