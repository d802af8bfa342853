/** The public client: track() (never blocks), the batch/linger timer, the send pump, flush(), close(). */
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import { Batcher } from "./batcher.js";
import { buildConfig, optionsFromEnv } from "./config.js";
import { ConfigError, EventsDroppedError, InvalidEventError, UndeliveredError } from "./errors.js";
import { Dispatcher } from "./dispatcher.js";
import { Gate } from "./gate.js";
import { Window } from "./limit.js";
import { checkEventType, checkOptions, encodeEvent, encodeProperties } from "./event.js";
import { newProducerId } from "./ids.js";
import * as lifecycle from "./lifecycle.js";
import { Counters } from "./metrics.js";
import { Sender } from "./sender.js";
import { DiskSpool } from "./spool.js";
import { SchemaCache } from "./registry.js";
import { Reporter } from "./report.js";
import { MemoryBacking, Store } from "./store.js";
import { HttpTransport } from "./transport.js";
function openSpool(cfg) {
    try {
        return new DiskSpool(cfg.spoolDir, cfg.spoolFsync === "always", (msg) => process.emitWarning(`headwater: ${msg}`));
    }
    catch (err) {
        if (err instanceof ConfigError)
            throw err;
        throw new ConfigError(`spoolDir (HEADWATER_SPOOL_DIR) ${cfg.spoolDir} is unusable: ${err.message}`);
    }
}
/** The CA certificates of the `caBundle` PEM file, or undefined (Node's trust store). */
function readCaBundle(path) {
    if (path === null)
        return undefined;
    let pem;
    try {
        pem = readFileSync(path);
    }
    catch (err) {
        throw new ConfigError(`caBundle (HEADWATER_CA_BUNDLE) ${path} is not readable: ${err.message}`);
    }
    if (!pem.includes("-----BEGIN CERTIFICATE-----")) {
        throw new ConfigError(`caBundle (HEADWATER_CA_BUNDLE) ${path} holds no PEM certificate`);
    }
    return pem;
}
/** Sends events to a Headwater gateway in batches; see the README for every option. */
export class Headwater extends EventEmitter {
    config;
    stateValue = "open";
    counters = new Counters();
    store;
    spool;
    transport;
    sender;
    batcher;
    parts;
    abort = new AbortController();
    recovered;
    nextSeq;
    enqueued = 0;
    dispatcher;
    gate;
    window;
    extraTransports = [];
    lingerTimer;
    closing;
    reporter = new Reporter(); // warnings when nobody listens to `failure`
    /** A client configured from `HEADWATER_*` variables; `overrides` win. */
    static fromEnv(overrides = {}, env = process.env) {
        return new Headwater(optionsFromEnv(env, overrides));
    }
    constructor(options) {
        super();
        const cfg = buildConfig(options);
        this.config = cfg;
        const ca = readCaBundle(cfg.caBundle); // before the spool is locked
        const report = (reason, n, detail) => this.storeDropped(reason, n, detail);
        let producerId;
        if (cfg.spoolDir !== null) {
            this.spool = openSpool(cfg);
            this.store = new Store(this.spool, Number.MAX_SAFE_INTEGER, cfg.spoolMaxBytes, cfg.spoolOverflow, report, this.spool.recovered);
            this.spool.recovered = [];
            producerId = this.spool.producerId;
            this.nextSeq = this.spool.startSeq;
        }
        else {
            this.store = new Store(new MemoryBacking(), cfg.maxPendingBatches, 2 ** 50, cfg.spoolOverflow, report);
            producerId = newProducerId();
            this.nextSeq = 0;
        }
        this.recovered = this.store.stats()[1];
        this.store.onReady = () => this.dispatcher.pump();
        this.parts = {
            producerId,
            nodeIdJson: JSON.stringify(cfg.nodeId),
            contextJson: Object.keys(cfg.context).length > 0 ? JSON.stringify(cfg.context) : null,
        };
        this.batcher = new Batcher(producerId, cfg.maxBatchEvents, cfg.maxBatchBytes);
        this.transport = cfg.transport ?? new HttpTransport(cfg.endpoint.startsWith("https:"), cfg.maxInFlight, cfg.connectionMaxAgeMs, ca);
        this.gate = new Gate(cfg.retryRefusedMaxMs, this.abort.signal, (e) => this.fail(e));
        this.window = new Window(cfg.maxInFlight);
        this.sender = new Sender(cfg, this.transport, this.counters, {
            delivered: (r) => this.safeEmit("delivery", r),
            failed: (e) => this.fail(e),
        }, this.abort.signal, this.gate, this.window, this.schemaCache(cfg, ca));
        this.dispatcher = new Dispatcher(cfg, this.store, this.sender, this.spool !== undefined, this.abort.signal, this.counters, (e) => this.fail(e), () => this.moveSealed());
        if (cfg.handleExit)
            lifecycle.register(this);
        if (this.recovered > 0)
            queueMicrotask(() => this.dispatcher.pump());
    }
    schemaCache(cfg, ca) {
        if (cfg.wireFormat !== "avro" || cfg.registryUrl === null)
            return undefined;
        const transport = cfg.transport ?? new HttpTransport(cfg.registryUrl.startsWith("https:"), 1, cfg.connectionMaxAgeMs, ca);
        if (transport !== this.transport)
            this.extraTransports.push(transport);
        return new SchemaCache(cfg.registryUrl, transport, cfg.schemaRefreshMs, cfg.requestTimeoutMs);
    }
    /** The body's codec: `encoding` (zstd, or gzip where zstd is unavailable) and its `implementation`. */
    codec() {
        return this.sender.codec;
    }
    /** This producer's id: persisted in the spool directory, else new for each client. */
    get producerId() {
        return this.parts.producerId;
    }
    /** "open", "closing" or "closed". */
    get state() {
        return this.stateValue;
    }
    /**
     * Queue one event; returns at once. Throws `InvalidEventError` for bad arguments only; a full queue or a
     * closed client is returned as `{ok: false}`, counted in `metrics().dropped` and emitted as `failure`.
     */
    track(eventType, properties, options) {
        checkEventType(eventType);
        const props = encodeProperties(properties);
        const [partitionKey, eventId, createdAt] = checkOptions(options);
        if (this.stateValue !== "open")
            return this.refuse("client_closed", "track() after close()");
        const batcher = this.batcher;
        if (batcher.queued >= this.config.maxQueueEvents) {
            if (this.config.queuePolicy === "drop_newest" || !batcher.evictOldest()) {
                return this.refuse("queue_full", `the queue holds ${batcher.queued} events (maxQueueEvents)`);
            }
            this.counters.settle(0, 0, { queue_full_oldest: 1 });
            this.fail(new EventsDroppedError("queue_full_oldest", 1, "oldest queued event evicted (queuePolicy drop_oldest)"));
        }
        const seq = this.nextSeq;
        const ev = encodeEvent(eventType, props, partitionKey, eventId, createdAt, seq, this.parts);
        if (ev.bytes > this.config.maxEventBytes || !batcher.fitsAlone(ev.bytes)) {
            throw new InvalidEventError(`the event is ${ev.bytes} bytes of JSON, over maxEventBytes (${this.config.maxEventBytes})`);
        }
        this.spool?.reserve(seq);
        this.nextSeq = seq + 1;
        this.enqueued += 1;
        const sealedBefore = batcher.sealedCount;
        const opened = batcher.add(ev.json, ev.bytes, seq);
        if (opened || !batcher.hasOpen)
            clearTimeout(this.lingerTimer);
        if (opened) {
            this.lingerTimer = setTimeout(() => this.sealOpen(), this.config.lingerMs);
            this.lingerTimer.unref();
        }
        if (batcher.sealedCount !== sealedBefore)
            this.moveSealed();
        return { ok: true, seq, eventId: ev.eventId };
    }
    /**
     * Send everything accepted so far and wait (at most `timeoutMs`, default no bound) until all of it is
     * acknowledged, rejected or dropped. Resolves true only if it all settled in time and no accepted event was
     * rejected or dropped since the previous flush() (or since the start): false tells the caller that events
     * were lost, as `metrics()` and the `failure` events say which.
     */
    async flush(options = {}) {
        const target = this.enqueued + this.recovered;
        this.sealOpen();
        const settled = await this.counters.until(target, options.timeoutMs);
        return this.counters.noLossSinceLastCheck() && settled;
    }
    /**
     * Flush for at most `timeoutMs` (default `exitTimeoutMs`), then stop. Resolves when every accepted event
     * was acknowledged; rejects with `UndeliveredError` otherwise (with a spool, what was not delivered stays
     * on disk for the next client). Idempotent: a second call settles the same way.
     */
    async close(options = {}) {
        const delivered = await this.closeQuietly(options);
        if (!delivered) {
            const m = this.metrics();
            const missing = this.enqueued + this.recovered - m.acknowledged;
            throw new UndeliveredError(missing, `${missing} accepted event(s) were not acknowledged by the gateway ` +
                `(rejected ${m.rejected}, dropped ${m.droppedTotal}, still spooled ${m.pendingEvents})`);
        }
    }
    /** close(), resolving true if every accepted event was acknowledged (never rejects). */
    closeQuietly(options = {}) {
        if (this.closing === undefined)
            this.closing = this.shutdown(options.timeoutMs ?? this.config.exitTimeoutMs);
        return this.closing;
    }
    /** @internal the exit hook. */
    closeForExit() {
        return this.closeQuietly().then(() => undefined);
    }
    /** A snapshot of the delivery counters. */
    metrics() {
        const eps = this.sender.endpoints;
        return { ...this.counters.snapshot(this.batcher.queued, this.enqueued, this.store.stats(), this.store.durableEvents(), this.window.limit.window), endpoint: eps.current()[1], failovers: eps.failovers, failbacks: eps.failbacks };
    }
    async shutdown(timeoutMs) {
        this.stateValue = "closing";
        this.gate.wake(true); // every batch waiting in backoff is sent again now (protocol.md §6.3)
        const target = this.enqueued + this.recovered;
        this.sealOpen();
        const flushed = await this.counters.until(target, timeoutMs);
        this.stateValue = "closed";
        this.abort.abort();
        this.window.stop();
        clearTimeout(this.lingerTimer);
        this.transport.close(); // ends requests still in flight: nothing is sent after close() returns
        for (const t of this.extraTransports)
            t.close();
        await this.dispatcher.drain(2000); // a custom transport may not end its requests at close(): 2 s at most
        const unsent = this.batcher.queued + (this.spool === undefined ? this.idleStoreEvents() : 0);
        if (unsent > 0) {
            this.counters.settle(0, 0, { closed_unsent: unsent });
            this.fail(new EventsDroppedError("closed_unsent", unsent, "client closed before delivery"));
        }
        if (this.spool !== undefined) {
            await this.spool.settled();
            this.spool.close(this.nextSeq);
        }
        this.reporter.close();
        lifecycle.unregister(this);
        return flushed && this.counters.acknowledged >= this.enqueued + this.recovered;
    }
    idleStoreEvents() {
        let n = 0;
        for (let b = this.store.take(); b !== undefined; b = this.store.take()) {
            n += b.events.length;
            this.store.ack(b);
        }
        return n;
    }
    refuse(reason, detail) {
        this.counters.refuse(reason);
        this.fail(new EventsDroppedError(reason, 1, detail));
        return { ok: false, reason };
    }
    /** Report `error` to `failure` listeners; without one, warn (a line per kind at most every 10 s, with counts). */
    fail(error) {
        if (this.listenerCount("failure") > 0) {
            this.safeEmit("failure", error);
            return;
        }
        this.reporter.report(error);
    }
    /** Emit without letting a listener's exception reach the delivery machinery. */
    safeEmit(event, ...args) {
        try {
            this.emit(event, ...args);
        }
        catch (err) {
            process.emitWarning(`headwater: a '${event}' listener threw: ${String(err)}`);
        }
    }
    storeDropped(reason, n, detail) {
        this.counters.settle(0, 0, { [reason]: n });
        this.fail(new EventsDroppedError(reason, n, detail));
    }
    sealOpen() {
        clearTimeout(this.lingerTimer);
        this.lingerTimer = undefined;
        this.batcher.seal();
        this.moveSealed();
    }
    /** Hand sealed batches to the store while it has room (backpressure leaves them queued). */
    moveSealed() {
        const store = this.store;
        for (let b = this.batcher.takeSealed((n) => !store.full(n)); b !== undefined; b = this.batcher.takeSealed((n) => !store.full(n))) {
            store.append(b);
        }
        this.dispatcher.pump();
    }
}
