"use strict";
/** Batch assembly: the open batch (at most N events and a byte cap) and the sealed batches waiting for the store. */
Object.defineProperty(exports, "__esModule", { value: true });
exports.Batcher = exports.BODY_OVERHEAD = void 0;
const ids_js_1 = require("./ids.js");
const wire_js_1 = require("./wire.js");
/** Bytes of a JSON batch body around its events: {"batch_id":...,"sent_at":...,"sdk":{...},"events":[...]}. */
exports.BODY_OVERHEAD = 256;
/** Packs encoded events into batches in seq order; sealed batches wait here until the store has room. */
class Batcher {
    producerId;
    maxEvents;
    maxBytes;
    open = [];
    openBytes = exports.BODY_OVERHEAD;
    openFirstSeq = 0;
    waiting = [];
    waitingEvents = 0;
    /** Batches sealed so far. */
    sealedCount = 0;
    constructor(producerId, maxEvents, maxBytes) {
        this.producerId = producerId;
        this.maxEvents = maxEvents;
        this.maxBytes = maxBytes;
    }
    /** True if an event of `size` bytes fits in an empty batch. */
    fitsAlone(size) {
        return exports.BODY_OVERHEAD + size + 1 <= this.maxBytes;
    }
    /** Add an event (it must fit alone); returns true if this opened a new batch (start the linger timer). */
    add(json, size, seq) {
        if (this.open.length > 0 && this.openBytes + size + 1 > this.maxBytes)
            this.seal();
        if (this.open.length === 0)
            this.openFirstSeq = seq;
        this.open.push(json);
        this.openBytes += size + 1;
        if (this.open.length >= this.maxEvents) {
            this.seal();
            return false;
        }
        return this.open.length === 1;
    }
    /** Seal the open batch, however small. */
    seal() {
        if (this.open.length === 0)
            return;
        const events = this.open;
        this.waiting.push({
            batchId: (0, ids_js_1.uuid7)(),
            producerId: this.producerId,
            firstSeq: this.openFirstSeq,
            lastSeq: this.openFirstSeq + events.length - 1,
            events,
            nbytes: this.openBytes - exports.BODY_OVERHEAD - events.length,
        });
        this.waitingEvents += events.length;
        this.sealedCount += 1;
        this.open = [];
        this.openBytes = exports.BODY_OVERHEAD;
    }
    /** The oldest sealed batch, if `fits(its bytes)`; removed from the waiting line. */
    takeSealed(fits) {
        const first = this.waiting[0];
        if (first === undefined || !fits(first.nbytes))
            return undefined;
        this.waiting.shift();
        this.waitingEvents -= first.events.length;
        return first;
    }
    /** Evict the oldest queued event (policy `drop_oldest`); false if nothing is queued. */
    evictOldest() {
        const first = this.waiting[0];
        if (first !== undefined) {
            const [gone, ...rest] = first.events;
            this.waitingEvents -= 1;
            if (rest.length === 0) {
                this.waiting.shift();
            }
            else {
                this.waiting[0] = { ...first, events: rest, firstSeq: (0, wire_js_1.seqOf)(rest[0]),
                    nbytes: first.nbytes - Buffer.byteLength(gone) };
            }
            return true;
        }
        const gone = this.open.shift();
        if (gone === undefined)
            return false;
        this.openBytes -= Buffer.byteLength(gone) + 1;
        this.openFirstSeq += 1;
        return true;
    }
    /** Events not yet handed to the store (open + sealed waiting). */
    get queued() {
        return this.open.length + this.waitingEvents;
    }
    /** True if the open batch holds events. */
    get hasOpen() {
        return this.open.length > 0;
    }
}
exports.Batcher = Batcher;
