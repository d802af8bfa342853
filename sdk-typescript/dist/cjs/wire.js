"use strict";
/** The wire format of protocol.md: the JSON batch body, and parsing the gateway's answers. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.AVRO_TYPE = exports.JSON_TYPE = void 0;
exports.jsonBody = jsonBody;
exports.parseRejections = parseRejections;
exports.parseError = parseError;
exports.parseRetryAfter = parseRetryAfter;
exports.seqOf = seqOf;
const version_js_1 = require("./version.js");
exports.JSON_TYPE = "application/json";
exports.AVRO_TYPE = "application/vnd.headwater.batch+avro";
const SDK_JSON = JSON.stringify({ name: version_js_1.SDK_NAME, version: version_js_1.VERSION });
/** The JSON batch body (protocol.md section 2), joining the already-encoded envelopes. */
function jsonBody(batch, sentAt) {
    return Buffer.from(`{"batch_id":"${batch.batchId}","sent_at":${sentAt},"sdk":${SDK_JSON},"events":[${batch.events.join(",")}]}`);
}
/** The `rejected` list of a 200/422 body; a malformed body counts as no rejection listed. */
function parseRejections(body) {
    try {
        const doc = JSON.parse(body.toString("utf8"));
        if (!Array.isArray(doc.rejected))
            return [];
        return doc.rejected
            .filter((r) => r !== null && typeof r === "object")
            .map((r) => ({ index: Number(r.index), code: text(r.code), message: text(r.message) }))
            .filter((r) => Number.isInteger(r.index));
    }
    catch {
        return [];
    }
}
function text(value) {
    return typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value);
}
/** [code, message] of an error body `{code, message}`; `http_<status>` when the body is not that JSON. */
function parseError(body, status) {
    try {
        const doc = JSON.parse(body.toString("utf8"));
        if (doc !== null && typeof doc === "object" && typeof doc.code === "string" && doc.code !== "") {
            return [doc.code, text(doc.message)];
        }
    }
    catch {
        // not the JSON error: fall through
    }
    return [`http_${status}`, body.subarray(0, 200).toString("utf8")];
}
/** Seconds to wait from a Retry-After header (delay-seconds, decimal, or HTTP-date); undefined if bad. */
function parseRetryAfter(value, nowMs = Date.now()) {
    if (value === undefined)
        return undefined;
    const v = value.trim();
    if (v === "")
        return undefined;
    if (/^\d+(\.\d+)?$/.test(v))
        return Number(v);
    const when = Date.parse(v);
    if (Number.isNaN(when) || !/[a-zA-Z]/.test(v))
        return undefined;
    return Math.max(0, (when - nowMs) / 1000);
}
const SEQ = /"seq":(\d+)/;
/** The seq of an encoded envelope (the first `"seq":` of it: envelope fields come before `properties`). */
function seqOf(event) {
    return Number(SEQ.exec(event)?.[1] ?? -1);
}
