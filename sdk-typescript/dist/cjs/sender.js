"use strict";
/** Delivering one batch: encode, compress, POST with retries, and turn the answer into an action on the store. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.Sender = void 0;
exports.split = split;
const compress_js_1 = require("./compress.js");
const errors_js_1 = require("./errors.js");
const failover_js_1 = require("./failover.js");
const ids_js_1 = require("./ids.js");
const retry_js_1 = require("./retry.js");
const avro_js_1 = require("./avro.js");
const version_js_1 = require("./version.js");
const wire_js_1 = require("./wire.js");
const EVENT_ID = /"event_id":"([^"]*)"/;
const EVENT_TYPE = /"event_type":"([^"]*)"/;
/** The two halves of a batch (protocol.md §4, splitting on 413): first floor(n/2) events, then the rest, with derived ids. */
function split(batch) {
    const mid = Math.floor(batch.events.length / 2);
    const half = (k, events) => ({
        batchId: (0, ids_js_1.splitBatchId)(batch.batchId, k),
        producerId: batch.producerId,
        firstSeq: (0, wire_js_1.seqOf)(events[0]),
        lastSeq: (0, wire_js_1.seqOf)(events[events.length - 1]),
        events,
        nbytes: events.reduce((s, e) => s + Buffer.byteLength(e), 0),
    });
    return [half(0, batch.events.slice(0, mid)), half(1, batch.events.slice(mid))];
}
/** Sends batches to `{endpoint}/v1/batch` (the active one of `endpoints`); counts and reports what happened. */
class Sender {
    cfg;
    transport;
    counters;
    events;
    abort;
    gate;
    window;
    schemas;
    endpoints;
    /** The body's codec, chosen once (zstd may fall back to gzip: see compress.ts). */
    codec;
    headers = {};
    avroHeaders = {};
    firstSent = new Map(); // batch id -> sent_at of its first send
    constructor(cfg, transport, counters, events, abort, gate, window, schemas) {
        this.cfg = cfg;
        this.transport = transport;
        this.counters = counters;
        this.events = events;
        this.abort = abort;
        this.gate = gate;
        this.window = window;
        this.schemas = schemas;
        this.endpoints = new failover_js_1.Endpoints(cfg.endpoints, cfg.failoverAfterFailures, cfg.failoverAfterMs, cfg.failbackProbeMs);
        this.codec = (0, compress_js_1.codecFor)(cfg.compression).then((codec) => {
            this.headers = { "Content-Type": wire_js_1.JSON_TYPE, "Content-Encoding": codec.encoding, Authorization: `Bearer ${cfg.writeKey}`,
                "User-Agent": version_js_1.USER_AGENT };
            this.avroHeaders = { ...this.headers, "Content-Type": wire_js_1.AVRO_TYPE };
            return codec;
        });
    }
    /**
     * Send `batch` until answered; `keepOnFailure` (a spool) keeps it after the retry deadline. Every attempt
     * passes the client's gate (protocol.md §6.1) and takes a place in the in-flight window (§6.2).
     */
    async deliver(batch, keepOnFailure) {
        const n = batch.events.length;
        this.counters.sent += n;
        this.counters.batchesSent += 1;
        let sentAt = this.firstSent.get(batch.batchId);
        if (sentAt === undefined) {
            sentAt = Date.now();
            this.firstSent.set(batch.batchId, sentAt);
        }
        const me = this.gate.newId();
        try {
            const deadline = Date.now() + this.cfg.retryDeadlineMs;
            let encoded;
            for (let attempt = 1;; attempt++) {
                if (!(await this.gate.enter(me)))
                    return { kind: "release" };
                let failure;
                let index; // the endpoint the attempt went to (none: the registry failed)
                try {
                    encoded ??= await this.encode(batch, sentAt); // a registry look-up may fail: retried like a send
                    await this.probe();
                    index = this.endpoints.current()[0];
                    const resp = await this.post(encoded, index);
                    if (resp === undefined)
                        return { kind: "release" }; // stopped while waiting for a place
                    if (!(0, failover_js_1.healthFailure)(resp.status))
                        this.endpoints.answered(index);
                    if ((0, retry_js_1.classify)(resp.status) !== "retry") {
                        this.gate.answered();
                        this.firstSent.delete(batch.batchId);
                        return this.answered(batch, encoded, resp);
                    }
                    const [code, message] = (0, wire_js_1.parseError)(resp.body, resp.status);
                    failure = new errors_js_1.RetryableStatusError(resp.status, (0, wire_js_1.parseRetryAfter)(resp.headers["retry-after"]), `${code} ${message}`);
                }
                catch (err) {
                    failure = err instanceof errors_js_1.TransportError ? err : new errors_js_1.TransportError(String(err));
                }
                if (this.abort.aborted)
                    return { kind: "release" };
                const status = failure instanceof errors_js_1.RetryableStatusError ? failure.status : 0;
                if (index !== undefined && (status === 0 || (0, failover_js_1.healthFailure)(status)) && this.moved(this.endpoints.failed(index))) {
                    this.gate.switched(); // failed over (protocol.md §9): try the new endpoint now
                    this.counters.retries += 1;
                    continue;
                }
                const since = this.gate.failed(me, failure);
                const retryAfterS = failure instanceof errors_js_1.RetryableStatusError && failure.retryAfter !== undefined
                    ? Math.min(failure.retryAfter, (retry_js_1.RETRY_AFTER_CAP_FACTOR * this.cfg.retryMaxMs) / 1000) : undefined;
                if (retryAfterS !== undefined)
                    this.gate.hold(retryAfterS * 1000);
                const short = this.endpoints.urls.length > 1 && (status === 0 || (0, failover_js_1.healthFailure)(status)); // §9: reach the failover bound on time
                const cap = failure.code === "connection_refused" || short ? Math.min(this.cfg.retryRefusedMaxMs, this.cfg.retryMaxMs) : this.cfg.retryMaxMs;
                const wait = this.gate.capped((0, retry_js_1.backoffMs)(attempt, this.cfg.retryBaseMs, cap, retryAfterS));
                if (Date.now() + wait > deadline) {
                    this.events.failed(failure);
                    if (keepOnFailure)
                        return { kind: "release" };
                    this.firstSent.delete(batch.batchId);
                    this.counters.settle(0, 0, { retry_deadline: n });
                    this.events.failed(new errors_js_1.TransportError(`batch ${batch.batchId}: ${n} event(s) dropped after the retry deadline`, "retry_deadline"));
                    return { kind: "ack" };
                }
                this.counters.retries += 1;
                if (!(await this.gate.backoff(wait, since)))
                    return { kind: "release" };
            }
        }
        finally {
            this.gate.gaveUp(me);
        }
    }
    /**
     * While on a later endpoint, one send at a time asks the earlier ones `GET /readyz` (when due), and the client
     * returns to the first that answers 200 (protocol.md §9). The probe carries no write key.
     */
    async probe() {
        const targets = this.endpoints.probeTargets();
        if (targets.length === 0)
            return;
        let ready;
        try {
            for (const i of targets) {
                const url = `${this.endpoints.urls[i]}${failover_js_1.READY_PATH}`;
                const resp = await this.transport.send({ method: "GET", url, headers: { "User-Agent": version_js_1.USER_AGENT }, body: Buffer.alloc(0) }, Math.min(failover_js_1.PROBE_TIMEOUT_MS, this.cfg.requestTimeoutMs)).catch(() => undefined);
                if (resp?.status === 200) {
                    ready = i;
                    break;
                }
            }
        }
        finally {
            if (this.moved(this.endpoints.probed(ready)))
                this.gate.switched();
        }
    }
    /** Log and act on a move to another endpoint; true if there was one. */
    moved(sw) {
        if (sw === undefined)
            return false;
        this.window.limit.newPath();
        if (sw.failback) {
            process.emitWarning(`headwater: failing back to ${sw.new} (ready again); was sending to ${sw.old}`, { code: "HEADWATER_FAILBACK" });
        }
        else {
            process.emitWarning(`headwater: failing over from ${sw.old} to ${sw.new} after ${sw.failures} failed attempt(s) in ` +
                `${(sw.spentMs / 1000).toFixed(1)} s`, { code: "HEADWATER_FAILOVER" });
        }
        return true;
    }
    /** One attempt inside a place of the window; undefined when the client stopped while waiting for a place. */
    async post(encoded, index) {
        if (encoded.sentIndex.length === 0)
            return { status: 200, headers: {}, body: Buffer.from("{}") };
        const slot = await this.window.acquire();
        if (slot === undefined)
            return undefined;
        let signal = "failure"; // no answer (connection error, timeout) unless one is read
        try {
            const resp = await this.transport.send({ method: "POST", url: `${this.endpoints.urls[index]}/v1/batch`,
                headers: encoded.contentType === wire_js_1.AVRO_TYPE ? this.avroHeaders : this.headers, body: encoded.body }, this.cfg.requestTimeoutMs);
            const outcome = (0, retry_js_1.classify)(resp.status);
            signal = outcome === "done" ? "success" : outcome === "retry" ? "failure" : "neutral";
            return resp;
        }
        finally {
            this.window.release(slot, signal);
        }
    }
    /** The compressed body: JSON, or the Avro fast path with each event framed with its registered schema. */
    async encode(batch, sentAt) {
        const all = batch.events.map((_e, i) => i);
        const codec = await this.codec;
        if (this.schemas === undefined) {
            return { body: codec.compress((0, wire_js_1.jsonBody)(batch, sentAt)), contentType: wire_js_1.JSON_TYPE, sentIndex: all, localRejects: [] };
        }
        const events = [];
        const sentIndex = [];
        const localRejects = [];
        for (const [i, raw] of batch.events.entries()) {
            const type = EVENT_TYPE.exec(raw)?.[1] ?? "";
            const schema = await this.schemas.get(type);
            const reject = (code, message) => {
                localRejects.push(new errors_js_1.EventRejectedError(batch.batchId, EVENT_ID.exec(raw)?.[1] ?? "", (0, wire_js_1.seqOf)(raw), code, message));
            };
            if (schema === null) {
                reject("unknown_event_type", `no subject for ${type} in the registry`);
                continue;
            }
            const env = JSON.parse(raw);
            const record = { event_id: env.event_id, event_type: env.event_type, producer_id: env.producer_id, seq: env.seq,
                node_id: env.node_id, created_at: env.created_at, sent_at: sentAt, received_at: null, sdk_name: version_js_1.SDK_NAME,
                sdk_version: version_js_1.VERSION, context: env.context ?? {}, properties: env.properties ?? {} };
            try {
                events.push((0, avro_js_1.framed)(schema.id, schema.write, record));
                sentIndex.push(i);
            }
            catch (err) {
                if (!(err instanceof avro_js_1.AvroMismatch))
                    throw err;
                reject("schema_mismatch", err.message);
            }
        }
        const body = (0, avro_js_1.avroBatchBody)(batch.batchId, sentAt, version_js_1.SDK_NAME, version_js_1.VERSION, events);
        return { body: codec.compress(body), contentType: wire_js_1.AVRO_TYPE, sentIndex, localRejects };
    }
    answered(batch, encoded, resp) {
        const outcome = (0, retry_js_1.classify)(resp.status);
        const n = batch.events.length;
        if (outcome === "split" && n > 1)
            return { kind: "split", parts: split(batch) };
        if (outcome !== "done") {
            const [code, message] = (0, wire_js_1.parseError)(resp.body, resp.status);
            const fallback = outcome === "split" && code === `http_${resp.status}` ? "event_too_large" : code;
            this.events.failed(new errors_js_1.BatchRejectedError(batch.batchId, resp.status, fallback, message, n));
            this.counters.settle(0, 0, { [outcome === "split" ? "too_large" : `refused_http_${resp.status}`]: n });
            return { kind: "ack" };
        }
        const rejected = [...encoded.localRejects];
        const seen = new Set();
        for (const r of (0, wire_js_1.parseRejections)(resp.body)) {
            const at = encoded.sentIndex[r.index];
            const event = at === undefined ? undefined : batch.events[at];
            if (event === undefined || seen.has(r.index))
                continue;
            seen.add(r.index);
            if (this.schemas !== undefined && r.code.includes("schema"))
                this.schemas.invalidate(EVENT_TYPE.exec(event)?.[1] ?? "");
            rejected.push(new errors_js_1.EventRejectedError(batch.batchId, EVENT_ID.exec(event)?.[1] ?? "", (0, wire_js_1.seqOf)(event), r.code, r.message));
        }
        const accepted = n - rejected.length;
        this.counters.settle(accepted, rejected.length);
        for (const err of rejected)
            this.events.failed(err);
        this.events.delivered({ batchId: batch.batchId, producerId: batch.producerId, firstSeq: batch.firstSeq,
            lastSeq: batch.lastSeq, accepted, rejected });
        return { kind: "ack" };
    }
}
exports.Sender = Sender;
