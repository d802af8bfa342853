"use strict";
/**
 * The send pump: up to `maxInFlight` deliveries at once (each request inside the adaptive in-flight window and
 * the client's gate, see sender.ts), each batch's outcome applied to the store.
 */
Object.defineProperty(exports, "__esModule", { value: true });
exports.Dispatcher = void 0;
const errors_js_1 = require("./errors.js");
/** Takes ready batches from the store, delivers them, and acks, splits or releases them afterwards. */
class Dispatcher {
    cfg;
    store;
    sender;
    durable;
    abort;
    counters;
    fail;
    afterSend;
    inFlight = 0;
    sends = new Set();
    constructor(cfg, store, sender, durable, abort, counters, fail, 
    /** Called after each send settled: the store may have room for queued batches. */
    afterSend) {
        this.cfg = cfg;
        this.store = store;
        this.sender = sender;
        this.durable = durable;
        this.abort = abort;
        this.counters = counters;
        this.fail = fail;
        this.afterSend = afterSend;
    }
    /** Start sends while fewer than `maxInFlight` are running and batches are ready. */
    pump() {
        if (this.abort.aborted)
            return;
        while (this.inFlight < this.cfg.maxInFlight) {
            const batch = this.store.take();
            if (batch === undefined)
                return;
            this.inFlight += 1;
            const send = this.sender.deliver(batch, this.durable).then((action) => this.settle(batch, action), (err) => {
                process.emitWarning(`headwater: send failed unexpectedly: ${String(err)}`);
                this.settle(batch, { kind: "release" });
            });
            this.sends.add(send);
            void send.finally(() => this.sends.delete(send));
        }
    }
    /** After the abort: wait (at most `boundMs`) until every send has settled. */
    async drain(boundMs) {
        let bound;
        await Promise.race([Promise.allSettled([...this.sends]), new Promise((r) => { bound = setTimeout(r, boundMs); })]);
        clearTimeout(bound);
    }
    settle(batch, action) {
        this.inFlight -= 1;
        if (action.kind === "ack") {
            this.store.ack(batch);
        }
        else if (action.kind === "split") {
            this.store.replace(batch, action.parts);
        }
        else if (this.abort.aborted && !this.durable) {
            this.store.ack(batch);
            this.counters.settle(0, 0, { closed_unsent: batch.events.length });
            this.fail(new errors_js_1.EventsDroppedError("closed_unsent", batch.events.length, "client closed during a retry"));
        }
        else {
            this.store.release(batch); // past its deadline with a spool: the gate paces the next attempt
        }
        this.afterSend();
    }
}
exports.Dispatcher = Dispatcher;
